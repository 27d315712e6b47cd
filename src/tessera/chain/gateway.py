"""What Tessera needs from a chain: one protocol, one real adapter (``substrate.SubstrateGateway``).

Accounts are passed and returned as 32-byte public keys: the runtime encodes addresses with its
own SS58 prefix, which need not be the prefix configured for the chain. Calls are blocking
(substrate-interface); async code runs them in a thread.
"""

from dataclasses import dataclass
from typing import Protocol


class ChainError(Exception):
    """A call the chain refused (module error) or could not answer."""


class ChainUnreachable(ChainError):
    pass


@dataclass(frozen=True, slots=True)
class TxResult:
    tx_hash: str
    block_hash: str
    block_number: int


@dataclass(frozen=True, slots=True)
class Collection:
    owner: bytes
    items: int
    max_supply: int | None


@dataclass(frozen=True, slots=True)
class ChainItem:
    """An NFT as the chain holds it: its owner and its metadata (None when it has none)."""

    owner: bytes
    metadata: str | None


@dataclass(frozen=True, slots=True)
class Signed:
    """A signed extrinsic (hex) and the signer's nonce it spends: submitted again, the same
    bytes land at most once."""

    extrinsic: str
    nonce: int


@dataclass(frozen=True, slots=True)
class Deposits:
    collection: int
    item: int
    existential: int


@dataclass(frozen=True, slots=True)
class Balance:
    free: int
    frozen: int


class ChainGateway(Protocol):
    def balance(self, account: bytes) -> Balance: ...

    def deposits(self) -> Deposits: ...

    def create_collection_fee(self, admin: bytes, *, max_supply: int | None) -> int: ...

    def create_collection(self, seed: bytes, *, max_supply: int | None) -> tuple[int, TxResult]: ...

    def sign_create_collection(self, seed: bytes, *, max_supply: int | None) -> Signed: ...

    def submit_create_collection(self, signed: Signed) -> tuple[int, TxResult]: ...

    def account_nonce(self, account: bytes) -> int:
        """The nonce of the account's next transaction, as the chain's state has it (the
        transactions waiting in a pool not counted)."""
        ...

    def collections_owned_by(self, account: bytes) -> list[int]: ...

    def collection(self, collection_id: int) -> Collection | None: ...

    def item_owner(self, collection_id: int, item_id: int) -> bytes | None: ...

    def item_metadata(self, collection_id: int, item_id: int) -> str | None: ...

    def collection_items(self, collection_id: int) -> dict[int, ChainItem]:
        """Every NFT of the collection by its id, read by storage prefix in pages."""
        ...

    def mint(self, seed: bytes, *, collection_id: int, item_id: int, owner: bytes) -> TxResult: ...

    def set_metadata(
        self, seed: bytes, *, collection_id: int, item_id: int, data: str
    ) -> TxResult: ...

    def transfer_fee(
        self, sender: bytes, *, collection_id: int, item_id: int, dest: bytes
    ) -> int: ...

    def transfer(
        self, seed: bytes, *, collection_id: int, item_id: int, dest: bytes
    ) -> TxResult: ...

    def send(self, seed: bytes, *, dest: bytes, amount: int) -> TxResult: ...
