"""The state of the in-memory Asset Hub (``memory_chain``) and the pallet rules that its
extrinsics' parts run by: pallet-nfts, pallet-balances.

Amounts are in planck. Deposits are reserved from the free balance of the one that pays them
(a collection's owner), and a payer is kept alive: what it keeps free may not drop below the
existential deposit. A part runs all or nothing: it checks everything, then changes the state;
a part that fails raises ``PartFailed`` with the pallet's error name and leaves the state as it
was (the ``Utility.batch_all`` of its calls reverted, its ``force_batch`` going on).
"""

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

from tessera.chain.gateway import (
    ChainItem,
    CreateCollection,
    Deposits,
    Filler,
    Fund,
    Mint,
    Part,
    PartOutcome,
    Transfer,
)

DOT = 10**10
DEPOSITS = Deposits(collection=10 * DOT, item=DOT // 100, existential=DOT // 100)
# An NFT's metadata reserves a base and so much per byte (Nfts.MetadataDepositBase,
# Nfts.DepositPerByte).
METADATA_BASE, METADATA_PER_BYTE = DOT // 1000, DOT // 100_000


def metadata_deposit(data: str) -> int:
    return METADATA_BASE + METADATA_PER_BYTE * len(data.encode())


class PartFailed(Exception):
    """A part that failed alone: its error as the chain names it (``Nfts.AlreadyExists``)."""


@dataclass
class MemoryCollection:
    owner: bytes
    max_supply: int | None
    items: set[int] = field(default_factory=set)
    admin: bytes | None = None  # the issuer; None: the owner

    @property
    def issuer(self) -> bytes:
        return self.admin or self.owner


@dataclass
class State:
    """Everything the chain's storage holds, at one block."""

    free: dict[bytes, int] = field(default_factory=dict)
    reserved: dict[bytes, int] = field(default_factory=dict)
    nonces: dict[bytes, int] = field(default_factory=dict)
    collections: dict[int, MemoryCollection] = field(default_factory=dict)
    next_collection: int = 0
    owners: dict[tuple[int, int], bytes] = field(default_factory=dict)
    metadata: dict[tuple[int, int], str] = field(default_factory=dict)
    # What each NFT's metadata reserved (set again: only the difference is reserved).
    metadata_deposits: dict[tuple[int, int], int] = field(default_factory=dict)

    def copy(self) -> "State":
        return copy.deepcopy(self)

    def spendable(self, account: bytes) -> int:
        """What the account may spend and stay alive."""
        return self.free.get(account, 0) - DEPOSITS.existential

    def reserve(self, account: bytes, amount: int) -> None:
        self.free[account] = self.free.get(account, 0) - amount
        self.reserved[account] = self.reserved.get(account, 0) + amount

    def items(
        self, collection_id: int, item_ids: Sequence[int] | None = None
    ) -> dict[int, ChainItem]:
        """The collection's NFTs (those of ``item_ids``), by id."""
        wanted = None if item_ids is None else set(item_ids)
        return {
            item: ChainItem(owner, self.metadata.get((collection, item)))
            for (collection, item), owner in sorted(self.owners.items())
            if collection == collection_id and (wanted is None or item in wanted)
        }


def run_part(state: State, signer: bytes, part: Part) -> PartOutcome:
    """One part of ``signer``'s extrinsic, all or nothing, and what became of it."""
    try:
        match part:
            case Mint():
                _mint(state, signer, part)
            case Transfer():
                _transfer(state, signer, part)
            case Fund():
                _fund(state, signer, part)
            case CreateCollection():
                return PartOutcome(None, _create(state, signer, part))
            case Filler():
                pass
    except PartFailed as failed:
        return PartOutcome(str(failed))
    return PartOutcome(None)


def _mint(state: State, signer: bytes, part: Mint) -> None:
    collection = state.collections.get(part.collection_id)
    if collection is None:
        raise PartFailed("Nfts.UnknownCollection")
    key = (part.collection_id, part.item_id)
    deposit = 0
    if part.owner is not None:  # Nfts.mint: the issuer only, within the max supply
        if signer != collection.issuer:
            raise PartFailed("Nfts.NoPermission")
        if part.item_id in collection.items or key in state.owners:
            raise PartFailed("Nfts.AlreadyExists")
        if collection.max_supply is not None and len(collection.items) >= collection.max_supply:
            raise PartFailed("Nfts.MaxSupplyReached")
        deposit += DEPOSITS.item
    elif key not in state.owners:
        raise PartFailed("Nfts.UnknownItem")
    if part.metadata is not None:  # Nfts.set_metadata: the owner or the admin
        if signer not in (collection.owner, collection.issuer):
            raise PartFailed("Nfts.NoPermission")
        deposit += metadata_deposit(part.metadata) - state.metadata_deposits.get(key, 0)
    if deposit > state.spendable(collection.owner):
        raise PartFailed("Balances.InsufficientBalance")
    state.reserve(collection.owner, deposit)
    if part.owner is not None:
        collection.items.add(part.item_id)
        state.owners[key] = part.owner
    if part.metadata is not None:
        state.metadata[key] = part.metadata
        state.metadata_deposits[key] = metadata_deposit(part.metadata)


def _transfer(state: State, signer: bytes, part: Transfer) -> None:
    key = (part.collection_id, part.item_id)
    owner = state.owners.get(key)
    if owner is None:
        raise PartFailed("Nfts.UnknownItem")
    if owner != signer:
        raise PartFailed("Nfts.NoPermission")
    state.owners[key] = part.dest


def _fund(state: State, signer: bytes, part: Fund) -> None:
    """``Balances.transfer_keep_alive``."""
    if part.amount > state.free.get(signer, 0):
        raise PartFailed("Token.FundsUnavailable")
    if part.amount > state.spendable(signer):
        raise PartFailed("Token.NotExpendable")
    if state.free.get(part.dest, 0) + part.amount < DEPOSITS.existential:
        raise PartFailed("Token.BelowMinimum")
    state.free[signer] -= part.amount
    state.free[part.dest] = state.free.get(part.dest, 0) + part.amount


def _create(state: State, signer: bytes, part: CreateCollection) -> int:
    if DEPOSITS.collection > state.spendable(signer):
        raise PartFailed("Balances.InsufficientBalance")
    state.reserve(signer, DEPOSITS.collection)
    collection_id = state.next_collection
    state.next_collection += 1
    state.collections[collection_id] = MemoryCollection(signer, part.max_supply, admin=part.admin)
    return collection_id
