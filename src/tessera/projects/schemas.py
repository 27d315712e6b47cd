import uuid
from datetime import datetime
from typing import Self

from tessera.chain.keys import ss58_address
from tessera.config import ChainConfig
from tessera.models import ProjectWallet
from tessera.schemas import SnakeModel


class ProjectWalletRead(SnakeModel):
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    address: str
    type: str
    custody: str
    project_id: uuid.UUID
    addresses: dict[str, str]
    """The wallet's address on each configured chain, encoded with that chain's SS58 prefix."""

    @classmethod
    def of(cls, wallet: ProjectWallet, chains: list[ChainConfig]) -> Self:
        return cls(
            id=wallet.id,
            created_at=wallet.created_at,
            updated_at=wallet.updated_at,
            address=wallet.address,
            type=wallet.type,
            custody=wallet.custody,
            project_id=wallet.project_id,
            addresses={c.name: ss58_address(wallet.public_key, c.ss58_prefix) for c in chains},
        )
