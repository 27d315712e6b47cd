"""Balances of wallets, in the shape of Mufi's ``POST /v1/users/balances``; the requests that
link a wallet a user holds."""

import uuid
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints

from tessera.chain.keys import public_key_of
from tessera.schemas import SnakeModel
from tessera.users.schemas import UserLookup, UserRead


def _ss58(address: str) -> str:
    public_key_of(address)  # ValueError: a 400 naming the field
    return address


class AssetBalance(SnakeModel):
    asset_id: str
    balance: str
    name: str
    symbol: str
    decimals: int
    lock: str


class WalletBalance(SnakeModel):
    address: str
    type: str
    code: int
    message: str
    generated_at: int
    data: list[AssetBalance] | None


Address = Annotated[
    str,
    # 46-48 characters with a one-byte network prefix (0-63), 49 with a two-byte one (64-16383).
    StringConstraints(pattern=r"^[1-9A-HJ-NP-Za-km-z]{46,49}$"),
    AfterValidator(_ss58),
    Field(description="An SS58 address of any network (its checksum is verified, else 400)."),
]
Signature = Annotated[
    str,
    StringConstraints(pattern=r"^0x[0-9a-fA-F]{128}$"),
    Field(description="0x-hex of the 64-byte sr25519 or ed25519 signature of the message."),
]


class WalletChallengeRequest(UserLookup):
    """The user (``email``, ``referenceId`` or ``id``) and the SS58 address they hold."""

    address: Address


class WalletChallengeRead(SnakeModel):
    message: str = Field(description="Sign these UTF-8 bytes with the wallet's key.")
    expires_at: int = Field(description="Unix seconds; answer before then, once.")


class WalletLinkRequest(UserLookup):
    """The user, the address and the signature of the challenge's message."""

    address: Address
    signature: Signature

    def signature_bytes(self) -> bytes:
        return bytes.fromhex(self.signature[2:])


class ReceivingWalletRequest(UserLookup):
    """The user and the wallet of theirs that NFTs are minted to from now on."""

    wallet_id: uuid.UUID = Field(alias="wallet_id")


class UserWallets(UserRead):
    """The user with all its wallets, and the one that receives mints."""

    receiving_wallet_id: uuid.UUID | None
