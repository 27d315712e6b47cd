"""The comparison of a product's NFTs with the chain, and the repair each finding calls for.

Pure functions of what the database and the chain say, read beforehand (``service``): the same
code runs against Asset Hub and against the tests' in-memory chain.

What the database expects of the chain, for a ``mint_nft`` product:
- its collection exists, owned by the project wallet, with ``max_items`` as its max supply;
- every minted item's NFT (NFT id = ``item_id``) exists, held by a wallet of the item's holder
  (an item ``external`` by the wallet outside Tessera recorded for it), with the product's
  ``metadata_uri`` as its metadata;
- the collection holds no NFT that no item of the product accounts for.
An item or a collection whose job is queued, submitted or failed is in flux: its chain state is
not compared, and it is reported ``stuck`` once it has waited longer than the stuck figure.

The repair follows the side that holds the key (docs/chain.md, Reconciliation): where the NFT should
sit in a custodial wallet, the database is the ledger (mint it again, move it back with the
custodial key that holds it now, set the metadata again); where it sat in a wallet its user
holds, or Tessera holds no key of the wallet it is in now, the chain is the truth (the item
follows its NFT to the user who holds that wallet, or is marked held outside Tessera).
"""

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from tessera.chain.gateway import ChainItem, Collection
from tessera.models import NftStatus


class Kind(StrEnum):
    MISSING_ON_CHAIN = "missing_on_chain"
    UNEXPECTED_ON_CHAIN = "unexpected_on_chain"
    OWNER_MISMATCH = "owner_mismatch"
    METADATA_MISMATCH = "metadata_mismatch"
    COLLECTION_MISMATCH = "collection_mismatch"
    STUCK = "stuck"


class Action(StrEnum):
    MINT = "mint"  # mint the NFT again to its holder (nft.mint)
    SET_METADATA = "set_metadata"  # set the product's metadata again (nft.mint, which skips
    # the mint of an NFT that exists)
    TRANSFER_BACK = "transfer_back"  # move it back with the custodial key holding it (nft.transfer)
    FOLLOW = "follow"  # the item follows its NFT to the user holding its wallet (nft.follow)
    MARK_EXTERNAL = "mark_external"  # the item is marked held outside Tessera (nft.follow)
    RETRY = "retry"  # the stuck job runs again
    REPORT = "report"  # reported only: an operator decides


PENDING = frozenset({NftStatus.QUEUED, NftStatus.SUBMITTED, NftStatus.FAILED})


@dataclass(frozen=True, slots=True)
class Wallet:
    """A wallet of one of the project's users, found by its public key."""

    id: uuid.UUID
    user_id: uuid.UUID
    custodial: bool


@dataclass(frozen=True, slots=True)
class ItemState:
    """An item of the product as the database has it."""

    id: uuid.UUID
    item_id: int
    owner_id: uuid.UUID
    nft_status: NftStatus | None
    nft_transfer_status: NftStatus | None
    nft_wallet_key: bytes | None  # the public key of the wallet the NFT sits in
    nft_held_by: str | None  # external: the public key (hex) of the wallet outside Tessera
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ProductState:
    """The product's NFT settings as the database has them."""

    collection_id: int | None
    nft_status: NftStatus | None
    metadata_uri: str | None
    max_items: int | None
    wallet_key: bytes  # the project wallet: the collection's owner
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Finding:
    kind: Kind
    item_id: int | None  # the item's number; None for the collection
    database: dict[str, Any] | None
    chain: dict[str, Any] | None
    item: uuid.UUID | None = None  # the item's id (the repair's subject)
    chain_owner: bytes | None = None  # owner_mismatch: the key holding the NFT now

    def shown(self) -> dict[str, Any]:
        """As the API answers it."""
        return {
            "kind": self.kind.value,
            "item_id": self.item_id,
            "database": self.database,
            "chain": self.chain,
        }


@dataclass(frozen=True, slots=True)
class Planned:
    """A finding's repair: the action, and the item it is for."""

    finding: Finding
    action: Action


# A public key as the chain's addresses show it.
Address = Callable[[bytes], str]


def compare(
    product: ProductState,
    collection: Collection | None,
    items: Sequence[ItemState],
    nfts: Mapping[int, ChainItem],
    wallets: Mapping[bytes, Wallet],
    *,
    now: datetime,
    stuck_after: timedelta,
    address: Address,
) -> list[Finding]:
    """What differs between the database (``product``, ``items``) and the chain (``collection``,
    its ``nfts``); ``wallets`` are the project's users' wallets among the keys involved."""
    if product.collection_id is None:
        if product.nft_status in PENDING and now - product.updated_at > stuck_after:
            side = {"nft_status": product.nft_status.value, "since": _iso(product.updated_at)}
            return [Finding(Kind.STUCK, None, side, None)]
        return []
    findings = []
    expected = {"owner": address(product.wallet_key), "max_supply": product.max_items}
    if collection is None:
        findings.append(
            Finding(Kind.COLLECTION_MISMATCH, None, expected | _collection(product), None)
        )
    elif collection.owner != product.wallet_key or collection.max_supply != product.max_items:
        found = {"owner": address(collection.owner), "max_supply": collection.max_supply}
        findings.append(
            Finding(Kind.COLLECTION_MISMATCH, None, expected | _collection(product), found)
        )
    for item in items:
        findings.extend(
            _compare_item(product, item, nfts.get(item.item_id), wallets, now, stuck_after, address)
        )
    numbers = {item.item_id for item in items}
    for nft_id in sorted(set(nfts) - numbers):
        findings.append(
            Finding(Kind.UNEXPECTED_ON_CHAIN, nft_id, None, _nft(nfts[nft_id], wallets, address))
        )
    return findings


def _compare_item(
    product: ProductState,
    item: ItemState,
    nft: ChainItem | None,
    wallets: Mapping[bytes, Wallet],
    now: datetime,
    stuck_after: timedelta,
    address: Address,
) -> list[Finding]:
    pending = [
        (name, status)
        for name, status in (
            ("nft_status", item.nft_status),
            ("transfer_status", item.nft_transfer_status),
        )
        if status in PENDING
    ]
    if pending:
        if now - item.updated_at <= stuck_after:
            return []
        name, status = pending[-1]
        side = {name: status.value, "since": _iso(item.updated_at)}
        chain = None if nft is None else _nft(nft, wallets, address)
        return [Finding(Kind.STUCK, item.item_id, side, chain, item=item.id)]
    if item.nft_status is None:
        return []  # no NFT (not a case a mint_nft product has)
    held = _held(item, address)
    if nft is None:
        side = {"nft_status": item.nft_status.value} | held
        return [Finding(Kind.MISSING_ON_CHAIN, item.item_id, side, None, item=item.id)]
    found = []
    if not _owner_agrees(item, nft.owner, wallets):
        found.append(
            Finding(
                Kind.OWNER_MISMATCH,
                item.item_id,
                held,
                _nft(nft, wallets, address, metadata=False),
                item=item.id,
                chain_owner=nft.owner,
            )
        )
    if product.metadata_uri and nft.metadata != product.metadata_uri:
        found.append(
            Finding(
                Kind.METADATA_MISMATCH,
                item.item_id,
                {"metadata": product.metadata_uri},
                {"metadata": nft.metadata},
                item=item.id,
            )
        )
    return found


def _owner_agrees(item: ItemState, owner: bytes, wallets: Mapping[bytes, Wallet]) -> bool:
    if item.nft_status == NftStatus.EXTERNAL:
        return item.nft_held_by == owner.hex()
    wallet = wallets.get(owner)
    return wallet is not None and wallet.user_id == item.owner_id


def plan(finding: Finding, item: ItemState | None, wallets: Mapping[bytes, Wallet]) -> Action:
    """The repair of one finding (``item``: the database's item it is about)."""
    if finding.kind in (Kind.UNEXPECTED_ON_CHAIN, Kind.COLLECTION_MISMATCH):
        return Action.REPORT
    if finding.kind == Kind.STUCK:
        return Action.RETRY
    if finding.kind == Kind.MISSING_ON_CHAIN:
        return Action.MINT
    if finding.kind == Kind.METADATA_MISMATCH:
        return Action.SET_METADATA
    assert finding.kind == Kind.OWNER_MISMATCH and finding.chain_owner is not None and item
    should = wallets.get(item.nft_wallet_key) if item.nft_wallet_key else None
    now = wallets.get(finding.chain_owner)
    ledger = item.nft_status != NftStatus.EXTERNAL and should is not None and should.custodial
    if ledger and now is not None and now.custodial:
        return Action.TRANSFER_BACK  # Tessera's keys moved it: the database is the ledger
    return Action.FOLLOW if now is not None else Action.MARK_EXTERNAL


def _held(item: ItemState, address: Address) -> dict[str, Any]:
    """Where the database says the item's NFT sits."""
    wallet: str | None
    if item.nft_status == NftStatus.EXTERNAL and item.nft_held_by:
        wallet = address(bytes.fromhex(item.nft_held_by))
    else:
        wallet = address(item.nft_wallet_key) if item.nft_wallet_key else None
    return {"user_id": str(item.owner_id), "wallet": wallet}


def _nft(
    nft: ChainItem, wallets: Mapping[bytes, Wallet], address: Address, *, metadata: bool = True
) -> dict[str, Any]:
    """An NFT as the chain has it, with the project user holding its wallet (or None)."""
    wallet = wallets.get(nft.owner)
    shown: dict[str, Any] = {
        "owner": address(nft.owner),
        "user_id": str(wallet.user_id) if wallet else None,
    }
    if metadata:
        shown["metadata"] = nft.metadata
    return shown


def _collection(product: ProductState) -> dict[str, Any]:
    return {"collection_id": product.collection_id}


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
