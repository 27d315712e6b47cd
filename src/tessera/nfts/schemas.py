"""What the NFT jobs work with: an item with the wallet its NFT goes to, the project wallet
that signs, a user's wallet found by its key (rows of ``repository``'s statements)."""

import uuid
from datetime import datetime
from typing import NamedTuple

from tessera.models import NftStatus


class JobItem(NamedTuple):
    """An item as its NFT jobs need it, with the wallet its NFT is to sit in (its owner's
    receiving wallet, else the owner's first custodial one; None: the owner has none)."""

    id: uuid.UUID
    project_id: uuid.UUID
    product_id: uuid.UUID
    item_id: int
    owner_id: uuid.UUID
    created_at: datetime
    nft_status: NftStatus | None
    nft_transfer_status: NftStatus | None
    nft_extrinsic_id: uuid.UUID | None
    nft_transfer_extrinsic_id: uuid.UUID | None
    nft_wallet_id: uuid.UUID | None
    wallet_id: uuid.UUID | None
    wallet_key: bytes | None


class SigningWallet(NamedTuple):
    """A custodial wallet that signs: its key, and its sealed seed."""

    id: uuid.UUID
    public_key: bytes
    address: str
    secret_key_id: str | None
    secret_blob: bytes | None


class HeldWallet(NamedTuple):
    """A wallet of the project's users, by its key (custodial or held by its user)."""

    id: uuid.UUID
    user_id: uuid.UUID
    public_key: bytes
    address: str
    custody: str
    secret_key_id: str | None
    secret_blob: bytes | None
