"""A product's chain work: create its NFT collection, mint an item, mirror a transfer on chain.

``queue_nft`` is how a use-case asks for that work: it adds the jobs in the caller's
transaction, which writes the rows' NFT state as queued. ``HANDLERS`` is what the worker runs.

Every handler reads the chain before it submits, so that a worker killed between submitting and
recording never creates, mints or transfers twice, and writes its result only while it holds the
job's lease (``hold``):
- collection: the chain does not make creation idempotent, so the attempt is recorded before it
  is submitted (``Product.nft_attempt``: the signed extrinsic and its nonce). A retry first reads
  the project wallet's nonce, then its collections: one that no product records, with the same
  max supply, is the one a crashed run created, and is adopted. Otherwise, while the recorded
  nonce is unspent the attempt may still sit in a pool (or was never sent): the same bytes are
  submitted again, which land at most once. Only once the nonce is spent by another call is a
  new attempt signed. Collection creation runs one at a time per project and chain (the job
  subject), so nothing else can own such an orphan.
- mint: NFT id = item_id; an item that exists on chain is not minted again; metadata is set
  unless it already equals the product's ``metadata_uri``; the wallet recorded is the one the
  chain says holds the NFT (a rerun's holder may have chosen another receiving wallet since).
- transfer: the goal is the item's current owner in the database; when the chain already agrees
  there is nothing to do. Otherwise the on-chain owner's custodial key signs, after the project
  wallet has sent it the fee and the existential deposit (custodial wallets hold no funds).
"""

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import BaseModel

from tessera.chain.gateway import ChainGateway, Signed, TxResult
from tessera.chain.keys import open_seed
from tessera.changes.outbox import EventType, record
from tessera.crypto import Sealed, SecretBox
from tessera.db import Transaction
from tessera.jobs.queue import JobKind, NotReady, enqueue
from tessera.jobs.repository import JobRow
from tessera.jobs.worker import JobContext, JobHandler, hold
from tessera.models import (
    Job,
    JobStatus,
    NftStatus,
    Product,
    ProductItem,
    ProjectWallet,
    UserWallet,
)
from tessera.models.base import utcnow
from tessera.products import repository as products
from tessera.products.rows import Item, ProductRow, item_of
from tessera.products.schemas import NftFailure, ProductItemRead, ProductRead
from tessera.projects.repository import primary_wallet
from tessera.users.repository import get_user_row
from tessera.users.schemas import UserRef


@dataclass(frozen=True, slots=True)
class NftJob:
    """Where a kind of NFT job shows its state: a status column of a product or an item."""

    model: type[Product] | type[ProductItem]
    status_column: str
    payload_key: str
    # Jobs with one subject run one at a time: an item's mint and transfers in order;
    # collection creations one per project wallet and chain (see the module docstring).
    subject: Callable[[Any], str]  # of the product's or item's row


def _item_subject(item: Item) -> str:
    return f"item:{item.id}"


def _collections_subject(product: ProductRow) -> str:
    return f"collections:{product.project_id}:{product.chain}"


NFT_JOBS = {
    JobKind.CREATE_COLLECTION: NftJob(Product, "nft_status", "product_id", _collections_subject),
    JobKind.MINT: NftJob(ProductItem, "nft_status", "product_item_id", _item_subject),
    JobKind.TRANSFER: NftJob(ProductItem, "nft_transfer_status", "product_item_id", _item_subject),
}


class ItemRef(NamedTuple):
    """An item, as far as its jobs need it."""

    id: uuid.UUID
    project_id: uuid.UUID


async def queue_nft(
    tx: Transaction, kind: JobKind, rows: Sequence[ProductRow] | Sequence[Item] | Sequence[ItemRef]
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
                "payload": {spec.payload_key: str(row.id)},
            }
            for row in rows
        ],
    )


def _row_id(kind: JobKind, job: Job) -> uuid.UUID:
    return uuid.UUID(job.payload[NFT_JOBS[kind].payload_key])


async def _set(
    context: JobContext,
    model: type[Product] | type[ProductItem],
    row_id: uuid.UUID,
    *,
    lease: Job | None = None,
    **values: object,
) -> None:
    """Write ``values`` on the row (while ``lease``, the running job, still holds its lease)."""
    async with context.database.transaction() as tx:
        if lease is not None:
            await hold(tx, lease)
        await products.write_columns(tx, model, row_id, values | {"updated_at": utcnow()})
        await tx.commit()


async def _finish(
    context: JobContext,
    kind: JobKind,
    row_id: uuid.UUID,
    event: EventType,
    *,
    lease: Job | None = None,
    failed: Job | None = None,
    **values: Any,
) -> None:
    """Write a job's outcome on its product or item (while ``lease``, the running job, still
    holds its lease), and the change that reports it (the object as the API shows it now; for
    ``nft.failed`` with the ``failed`` job's kind and error), in one transaction."""
    model = NFT_JOBS[kind].model
    values["updated_at"] = utcnow()
    async with context.database.transaction() as tx:
        if lease is not None:
            await hold(tx, lease)
        await products.write_columns(tx, model, row_id, values)
        project_id, shown = await (_product_read if model is Product else _item_read)(tx, row_id)
        data: BaseModel = shown
        if failed is not None:
            error = await products.job_error(tx, failed.id) or ""
            key = "product" if model is Product else "product_item"
            data = NftFailure(job=kind.value, error=error, **{key: shown})
        await record(tx, project_id, event, [data])
        await tx.commit()


async def _product_read(tx: Transaction, product_id: uuid.UUID) -> tuple[uuid.UUID, BaseModel]:
    project_id = await products.project_of_product(tx, product_id)
    product = await products.read_product(tx, project_id, product_id)
    assert product is not None  # its job's row, just written
    return project_id, ProductRead.model_validate(product)


async def _item_read(tx: Transaction, item_id: uuid.UUID) -> tuple[uuid.UUID, BaseModel]:
    item = await products.item_row(tx, item_id)
    assert item is not None  # its job's row: items are not deleted
    project_id = await products.project_of_product(tx, item.product_id)
    product = await products.get_product_row(tx, project_id, item.product_id)
    owner = await get_user_row(tx, project_id, UserRef("id", item.owner_id))
    return project_id, ProductItemRead.of(item_of(item, product=product, owner=owner))


def _seed(box: SecretBox, wallet: ProjectWallet | UserWallet) -> bytes:
    if wallet.secret_key_id is None or wallet.secret_blob is None:
        raise RuntimeError(f"wallet {wallet.address} is held by its user: Tessera cannot sign")
    return open_seed(
        box, public_key=wallet.public_key, secret=Sealed(wallet.secret_key_id, wallet.secret_blob)
    )


def _tx(tx: TxResult | None, prefix: str) -> dict[str, Any]:
    return (
        {} if tx is None else {f"{prefix}_tx_hash": tx.tx_hash, f"{prefix}_block": tx.block_number}
    )


async def create_collection(context: JobContext, job: Job) -> None:
    product_id = _row_id(JobKind.CREATE_COLLECTION, job)
    async with context.database.session(write=False) as session:
        product = await session.get(Product, product_id)
        if product is None or product.nft_collection_id is not None:
            return  # deleted with its unused event, or done
        wallet = await primary_wallet(session, product.project_id)
        recorded = await products.recorded_collections(session, product.project_id, product.chain)
    seed, chain = _seed(context.box, wallet), str(product.chain)
    max_supply = product.max_items
    attempt = Signed(**product.nft_attempt) if product.nft_attempt else None

    def find(gateway: ChainGateway) -> int | Signed:
        """A collection to adopt, or the attempt to submit (the recorded one, or a new one)."""
        # The nonce before the collections: an attempt that lands in between is among them.
        nonce = gateway.account_nonce(wallet.public_key)
        for collection_id in gateway.collections_owned_by(wallet.public_key):
            if collection_id in recorded:
                continue
            found = gateway.collection(collection_id)
            if found is not None and found.max_supply == max_supply:
                return collection_id  # created by a run that died before recording it
        if attempt is not None and nonce <= attempt.nonce:
            return attempt  # in a pool, or never sent: its fate is not known yet
        return gateway.sign_create_collection(seed, max_supply=max_supply)

    found = await context.chains.run(chain, find)
    if isinstance(found, Signed):
        if found is not attempt:
            recorded_attempt = {"extrinsic": found.extrinsic, "nonce": found.nonce}
            await _set(
                context,
                Product,
                product_id,
                lease=job,
                nft_status=NftStatus.SUBMITTED,
                nft_attempt=recorded_attempt,
            )
        signed = found
        collection_id = (
            await context.chains.run(chain, lambda g: g.submit_create_collection(signed))
        )[0]
    else:
        collection_id = found
    await _finish(
        context,
        JobKind.CREATE_COLLECTION,
        product_id,
        EventType.NFT_COLLECTION_CREATED,
        lease=job,
        nft_status=NftStatus.CREATED,
        nft_collection_id=collection_id,
        nft_attempt=None,
    )


async def mint(context: JobContext, job: Job) -> None:
    item_id = _row_id(JobKind.MINT, job)
    async with context.database.session(write=False) as session:
        item = await session.get(ProductItem, item_id)
        if item is None:
            return
        product = await session.get(Product, item.product_id)
        assert product is not None  # an item keeps its product (foreign key)
        if product.nft_collection_id is None:
            if product.nft_status == NftStatus.FAILED:
                raise RuntimeError("the product's NFT collection could not be created")
            raise NotReady("the product's NFT collection is not created yet")
        owner = await products.receiving_wallet(session, item.owner_id)
        wallet = await primary_wallet(session, product.project_id)
    seed = _seed(context.box, wallet)
    collection_id, nft_id, metadata = product.nft_collection_id, item.item_id, product.metadata_uri

    def work(gateway: ChainGateway) -> tuple[TxResult | None, bytes]:
        tx = None
        holder = gateway.item_owner(collection_id, nft_id)
        if holder is None:
            tx = gateway.mint(
                seed, collection_id=collection_id, item_id=nft_id, owner=owner.public_key
            )
            holder = owner.public_key
        if metadata and gateway.item_metadata(collection_id, nft_id) != metadata:
            gateway.set_metadata(seed, collection_id=collection_id, item_id=nft_id, data=metadata)
        return tx, holder

    await _set(context, ProductItem, item_id, lease=job, nft_status=NftStatus.SUBMITTED)
    tx, holder = await context.chains.run(str(product.chain), work)
    held: dict[str, Any]
    if holder == owner.public_key:
        held = {"nft_status": NftStatus.MINTED, "nft_wallet_id": owner.id, "nft_held_by": None}
    else:  # minted by an earlier run, to the wallet the holder received in then
        async with context.database.session(write=False) as session:
            holding = await products.wallet_by_key(session, product.project_id, holder)
        held = (
            {"nft_status": NftStatus.MINTED, "nft_wallet_id": holding.id, "nft_held_by": None}
            if holding is not None
            else {
                "nft_status": NftStatus.EXTERNAL,
                "nft_wallet_id": None,
                "nft_held_by": holder.hex(),
            }
        )
    await _finish(
        context, JobKind.MINT, item_id, EventType.NFT_MINTED, lease=job, **held, **_tx(tx, "nft")
    )


async def transfer(context: JobContext, job: Job) -> None:
    item_id = _row_id(JobKind.TRANSFER, job)
    async with context.database.session(write=False) as session:
        item = await session.get(ProductItem, item_id)
        if item is None:
            return
        if item.nft_status == NftStatus.FAILED:
            raise RuntimeError("the item could not be minted")
        if item.nft_status != NftStatus.MINTED:
            raise NotReady("the item is not minted yet")
        product = await session.get(Product, item.product_id)
        assert product is not None and product.nft_collection_id is not None  # it is minted
        target = await products.receiving_wallet(session, item.owner_id)
        wallet = await primary_wallet(session, product.project_id)
    chain, collection_id, nft_id = str(product.chain), product.nft_collection_id, item.item_id

    current = await context.chains.run(chain, lambda g: g.item_owner(collection_id, nft_id))
    tx = None  # when the chain already agrees (a run that died after submitting, or no move)
    if current != target.public_key:
        async with context.database.session(write=False) as session:
            holder = (
                None
                if current is None
                else await products.custodial_wallet(session, product.project_id, current)
            )
        if current is None or holder is None:
            raise RuntimeError("the on-chain owner is not a custodial wallet of this project")
        sponsor, signer, sender = _seed(context.box, wallet), _seed(context.box, holder), current

        def work(gateway: ChainGateway) -> TxResult:
            fee = gateway.transfer_fee(
                sender, collection_id=collection_id, item_id=nft_id, dest=target.public_key
            )
            needed = 2 * fee + gateway.deposits().existential
            held = gateway.balance(sender).free
            if held < needed:
                gateway.send(sponsor, dest=sender, amount=needed - held)
            return gateway.transfer(
                signer, collection_id=collection_id, item_id=nft_id, dest=target.public_key
            )

        await _set(
            context, ProductItem, item_id, lease=job, nft_transfer_status=NftStatus.SUBMITTED
        )
        tx = await context.chains.run(chain, work)
    await _finish(
        context,
        JobKind.TRANSFER,
        item_id,
        EventType.NFT_TRANSFERRED,
        lease=job,
        nft_transfer_status=NftStatus.TRANSFERRED,
        nft_status=NftStatus.MINTED,
        nft_wallet_id=target.id,
        nft_held_by=None,
        **_tx(tx, "nft_transfer"),
    )


def _show(kind: JobKind) -> Callable[[JobContext, Job, JobStatus], Awaitable[None]]:
    """A job that gave up shows failed on its row; one retried by hand shows queued again."""
    spec = NFT_JOBS[kind]

    async def show(context: JobContext, job: Job, status: JobStatus) -> None:
        if status != JobStatus.FAILED:
            queued: dict[str, Any] = {spec.status_column: NftStatus.QUEUED}
            await _set(context, spec.model, _row_id(kind, job), **queued)
            return
        failed: dict[str, Any] = {spec.status_column: NftStatus.FAILED}
        await _finish(context, kind, _row_id(kind, job), EventType.NFT_FAILED, failed=job, **failed)

    return show


HANDLERS: dict[str, JobHandler] = {
    JobKind.CREATE_COLLECTION: JobHandler(create_collection, _show(JobKind.CREATE_COLLECTION)),
    JobKind.MINT: JobHandler(mint, _show(JobKind.MINT)),
    JobKind.TRANSFER: JobHandler(transfer, _show(JobKind.TRANSFER)),
}
