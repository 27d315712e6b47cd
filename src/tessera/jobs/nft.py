"""NFT jobs: create a product's collection, mint an item, mirror a transfer on chain.

Every handler reads the chain before it submits, so that a worker killed between submitting and
recording never creates, mints or transfers twice:
- collection: a collection owned by the project wallet that no product records, with the same
  max supply, is the one a crashed run created; it is adopted. Collection creation runs one at a
  time per project and chain (the job subject), so nothing else can own such an orphan.
- mint: NFT id = item_id; an item that exists on chain is not minted again; metadata is set
  unless it already equals the product's ``metadata_uri``.
- transfer: the goal is the item's current owner in the database; when the chain already agrees
  there is nothing to do. Otherwise the on-chain owner's custodial key signs, after the project
  wallet has sent it the fee and the existential deposit (custodial wallets hold no funds).
"""

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.chain.gateway import ChainGateway, TxResult
from tessera.chain.keys import open_seed
from tessera.crypto import Sealed, SecretBox
from tessera.jobs.queue import CREATE_COLLECTION, MINT, TRANSFER
from tessera.jobs.worker import JobKind, NotReady, Worker
from tessera.models import Job, Product, ProductItem, ProjectWallet, UserWallet
from tessera.projects.service import primary_wallet


def _seed(box: SecretBox, wallet: ProjectWallet | UserWallet) -> bytes:
    return open_seed(
        box, public_key=wallet.public_key, secret=Sealed(wallet.secret_key_id, wallet.secret_blob)
    )


async def _user_wallet(session: AsyncSession, user_id: uuid.UUID) -> UserWallet:
    wallet = await session.scalar(
        select(UserWallet)
        .where(UserWallet.user_id == user_id)
        .order_by(UserWallet.created_at)
        .limit(1)
    )
    if wallet is None:
        raise RuntimeError(f"user {user_id} has no wallet")
    return wallet


async def _set(worker: Worker, model: Any, row_id: uuid.UUID, **values: object) -> None:
    async with worker.database.session() as session:
        await session.execute(update(model).where(model.id == row_id).values(**values))
        await session.commit()


def _tx(tx: TxResult | None, prefix: str = "nft") -> dict[str, object]:
    return (
        {} if tx is None else {f"{prefix}_tx_hash": tx.tx_hash, f"{prefix}_block": tx.block_number}
    )


# collection


async def create_collection(worker: Worker, job: Job) -> None:
    product_id = uuid.UUID(job.payload["product_id"])
    async with worker.database.session(write=False) as session:
        product = await session.get(Product, product_id)
        if product is None or product.nft_collection_id is not None:
            return  # deleted with its unused event, or done
        wallet = await primary_wallet(session, product.project_id)
        recorded = set(
            await session.scalars(
                select(Product.nft_collection_id).where(
                    Product.project_id == product.project_id,
                    Product.chain == product.chain,
                    Product.nft_collection_id.is_not(None),
                )
            )
        )
    seed = _seed(worker.box, wallet)
    max_supply = product.max_items

    def work(gateway: ChainGateway) -> tuple[int, TxResult | None]:
        for collection_id in gateway.collections_owned_by(wallet.public_key):
            if collection_id in recorded:
                continue
            found = gateway.collection(collection_id)
            if found is not None and found.max_supply == max_supply:
                return collection_id, None  # created by a run that died before recording it
        return gateway.create_collection(seed, max_supply=max_supply)

    await _set(worker, Product, product_id, nft_status="submitted")
    collection_id, _ = await worker.chains.run(str(product.chain), work)
    await _set(worker, Product, product_id, nft_status="created", nft_collection_id=collection_id)


# mint


async def mint(worker: Worker, job: Job) -> None:
    item_id = uuid.UUID(job.payload["product_item_id"])
    async with worker.database.session(write=False) as session:
        item = await session.get(ProductItem, item_id)
        if item is None:
            return
        product = await session.get(Product, item.product_id)
        assert product is not None
        if product.nft_collection_id is None:
            if product.nft_status == "failed":
                raise RuntimeError("the product's NFT collection could not be created")
            raise NotReady("the product's NFT collection is not created yet")
        owner = await _user_wallet(session, item.owner_id)
        wallet = await primary_wallet(session, product.project_id)
    seed = _seed(worker.box, wallet)
    collection_id, nft_id, metadata = product.nft_collection_id, item.item_id, product.metadata_uri

    def work(gateway: ChainGateway) -> TxResult | None:
        tx = None
        if gateway.item_owner(collection_id, nft_id) is None:
            tx = gateway.mint(
                seed, collection_id=collection_id, item_id=nft_id, owner=owner.public_key
            )
        if metadata and gateway.item_metadata(collection_id, nft_id) != metadata:
            gateway.set_metadata(seed, collection_id=collection_id, item_id=nft_id, data=metadata)
        return tx

    await _set(worker, ProductItem, item_id, nft_status="submitted")
    tx = await worker.chains.run(str(product.chain), work)
    await _set(worker, ProductItem, item_id, nft_status="minted", **_tx(tx))


# transfer


async def transfer(worker: Worker, job: Job) -> None:
    item_id = uuid.UUID(job.payload["product_item_id"])
    async with worker.database.session(write=False) as session:
        item = await session.get(ProductItem, item_id)
        if item is None:
            return
        if item.nft_status != "minted":
            raise NotReady("the item is not minted yet")
        product = await session.get(Product, item.product_id)
        assert product is not None and product.nft_collection_id is not None
        target = await _user_wallet(session, item.owner_id)
        wallet = await primary_wallet(session, product.project_id)
    chain, collection_id, nft_id = str(product.chain), product.nft_collection_id, item.item_id

    current = await worker.chains.run(chain, lambda g: g.item_owner(collection_id, nft_id))
    if current != target.public_key:
        async with worker.database.session(write=False) as session:
            holder = await session.scalar(
                select(UserWallet).where(
                    UserWallet.project_id == product.project_id,
                    UserWallet.public_key == current,
                    UserWallet.custody == "custodial",
                )
            )
        if current is None or holder is None:
            raise RuntimeError("the on-chain owner is not a custodial wallet of this project")
        sponsor, signer = _seed(worker.box, wallet), _seed(worker.box, holder)

        def work(gateway: ChainGateway) -> TxResult:
            fee = gateway.transfer_fee(
                current, collection_id=collection_id, item_id=nft_id, dest=target.public_key
            )
            needed = 2 * fee + gateway.deposits().existential
            held = gateway.balance(current).free
            if held < needed:
                gateway.send(sponsor, dest=current, amount=needed - held)
            return gateway.transfer(
                signer, collection_id=collection_id, item_id=nft_id, dest=target.public_key
            )

        await _set(worker, ProductItem, item_id, nft_transfer_status="submitted")
        tx = await worker.chains.run(chain, work)
    else:
        tx = None  # the chain already agrees (a run that died after submitting, or no move)
    await _set(
        worker, ProductItem, item_id, nft_transfer_status="transferred", **_tx(tx, "nft_transfer")
    )


def _status_marker(model: Any, key: str, column: str) -> Any:
    """The hook that shows a job's end on its row: failed, or queued again on retry."""

    async def mark(worker: Worker, job: Job, error: str | None) -> None:
        row_id = uuid.UUID(job.payload[key])
        await _set(worker, model, row_id, **{column: "failed" if error else "queued"})

    return mark


KINDS = {
    CREATE_COLLECTION: JobKind(
        create_collection, _status_marker(Product, "product_id", "nft_status")
    ),
    MINT: JobKind(mint, _status_marker(ProductItem, "product_item_id", "nft_status")),
    TRANSFER: JobKind(
        transfer, _status_marker(ProductItem, "product_item_id", "nft_transfer_status")
    ),
}
