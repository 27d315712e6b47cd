"""How a use-case asks for a product's chain work: create its NFT collection, mint an item's NFT,
mirror an item's transfer on chain. ``queue_nft`` adds the jobs in the caller's transaction,
which writes the rows' NFT state as queued; the worker runs them (``tessera.nfts``).

A kind's jobs show their state on a status column of a product or an item (``NFT_JOBS``). Jobs
with one subject run one at a time: an item's mint and transfers in order, collection
creations one per project wallet and chain. Jobs with one batch key are claimed together: a
product's mints (one collection, one signer), a project's on-chain transfers (one sponsor).
"""

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from tessera.db import Transaction
from tessera.jobs.queue import JobKind, enqueue
from tessera.jobs.repository import JobRow
from tessera.models import Product, ProductItem
from tessera.products.rows import ItemRow, ProductRow


class ItemRef(NamedTuple):
    """An item, as far as its jobs need it."""

    id: uuid.UUID
    project_id: uuid.UUID
    product_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class NftJob:
    """Where a kind of NFT job shows its state: a status column of a product or an item."""

    model: type[Product] | type[ProductItem]
    status_column: str
    payload: Callable[[Any], dict[str, str]]  # of the product's or item's row
    subject: Callable[[Any], str]
    batch: Callable[[Any], str | None]


def _item_payload(item: ItemRow | ItemRef) -> dict[str, str]:
    return {"product_item_id": str(item.id), "product_id": str(item.product_id)}


def item_subject(item_id: uuid.UUID) -> str:
    """The subject of an item's NFT jobs: one runs at a time."""
    return f"item:{item_id}"


NFT_JOBS = {
    JobKind.CREATE_COLLECTION: NftJob(
        Product,
        "nft_status",
        lambda product: {"product_id": str(product.id)},
        lambda product: f"collections:{product.project_id}:{product.chain}",
        lambda product: None,
    ),
    JobKind.MINT: NftJob(
        ProductItem,
        "nft_status",
        _item_payload,
        lambda item: item_subject(item.id),
        lambda item: f"mint:{item.product_id}",
    ),
    JobKind.TRANSFER: NftJob(
        ProductItem,
        "nft_transfer_status",
        _item_payload,
        lambda item: item_subject(item.id),
        lambda item: f"transfer:{item.project_id}",
    ),
}


async def queue_nft(
    tx: Transaction,
    kind: JobKind,
    rows: Sequence[ProductRow] | Sequence[ItemRow] | Sequence[ItemRef],
) -> list[JobRow]:
    """Add the jobs of ``kind`` for ``rows`` in the caller's transaction, which writes their
    NFT state (``NFT_JOBS[kind].status_column``) as queued; the jobs."""
    spec = NFT_JOBS[kind]
    return await enqueue(
        tx,
        [
            {
                "project_id": row.project_id,
                "kind": kind,
                "subject": spec.subject(row),
                "batch": spec.batch(row),
                "payload": spec.payload(row),
            }
            for row in rows
        ],
    )
