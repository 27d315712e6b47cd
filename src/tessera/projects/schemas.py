import uuid
from datetime import datetime
from typing import Self

from tessera.auth.principal import Permission
from tessera.chain.keys import ss58_address
from tessera.config import Chain, ChainConfig
from tessera.models.project import KeyPermission, Paper
from tessera.projects.repository import ProjectWalletRow
from tessera.schemas import SnakeInput, SnakeModel


class WalletBalancesQuery(SnakeInput):
    chain: Chain | None = None
    """The chain to read the balances on; absent: the first configured."""


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
    def of(cls, wallet: ProjectWalletRow, chains: list[ChainConfig]) -> Self:
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


# What the CLI prints (credentials appear once, in the *Created schemas).


class ProjectCreated(SnakeModel):
    project_id: uuid.UUID
    api_key: str
    client_id: str
    client_secret: str


class ApiKeyRead(SnakeModel):
    id: uuid.UUID
    prefix: str
    name: str | None
    permission: KeyPermission
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


class ProjectSettings(SnakeModel):
    id: uuid.UUID
    name: str
    require_activation: bool
    ticket_emails: bool
    paper: Paper
    ticket_pdf_in_emails: bool


class ApiKeyCreated(SnakeModel):
    id: uuid.UUID
    api_key: str
    permission: KeyPermission
    expires_at: datetime | None


class ClientCreated(SnakeModel):
    """A token client's credentials for ``POST /v1/auth/token``; the secret is shown only here."""

    client_id: str
    client_secret: str
    permission: Permission


class ClientRead(SnakeModel):
    client_id: str
    permission: Permission
    created_at: datetime
    rotated_at: datetime | None
    revoked_at: datetime | None


class IdentityBindingRead(SnakeModel):
    project_id: uuid.UUID
    issuer: str
    subject: str
    permission: Permission
