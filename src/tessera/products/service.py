"""Product use-cases: create, read, update, sales, issue items, redeem, transfer."""

import uuid
from typing import Any

from tessera.auth.principal import Principal
from tessera.chain.gateway import ChainGateway, Deposits
from tessera.chain.keys import USER_CONTROLLED, ss58_address
from tessera.chain.registry import Chains
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Database, Transaction, rerun_on_conflict
from tessera.errors import (
    InsufficientCollectionBalance,
    InvalidInput,
    NftHeldByUser,
    ProductNotFound,
    UserNotFound,
)
from tessera.events.repository import get_event_row
from tessera.jobs.queue import JobKind
from tessera.mail import service as outbox
from tessera.mail.letters import Kind
from tessera.mail.service import TicketMail, tickets_of
from tessera.models import NftStatus
from tessera.models.base import utcnow
from tessera.products import item_repository, repository, rules
from tessera.products.item_schemas import (
    ItemFilter,
    ItemList,
    ItemOwner,
    ItemsIssue,
    ItemTransferList,
    ProductItemRead,
    RedeemRequest,
    TransferItem,
    TransferRead,
    TransferRequest,
)
from tessera.products.nft_jobs import queue_nft
from tessera.products.rows import (
    Item,
    ItemRow,
    ProductRow,
    ProductView,
    SalePage,
    product_view,
)
from tessera.products.schemas import ProductCreate, ProductRead, ProductUpdate, missing_for_mint
from tessera.projects.repository import primary_wallet
from tessera.schemas import PageParams
from tessera.seats.rules import require_no_seats_taken, seated_stock
from tessera.users.repository import find_user_row, get_user_row, users_by
from tessera.users.schemas import UserPageLookup, UserRef
from tessera.waiting import rules as waiting


@rerun_on_conflict
async def create_product(
    database: Database, principal: Principal, *, body: ProductCreate, chains: Chains
) -> ProductRead:
    """Create a product. ``mint_nft`` needs ``metadata_uri`` and ``chain`` (400), a configured
    chain (409), and a project wallet that can pay the collection deposit, the fee and keep its
    existential deposit (409 stating both amounts); the worker then creates the collection.

    The chain is read before the write transaction begins, so that a slow chain holds no write
    slot (SQLite has one). The balance is advice at that moment anyway: the worker's collection
    job is what spends it.
    """
    if problems := body.missing_for_mint():
        raise InvalidInput(*problems)
    if body.mint_nft and body.chain:
        await _require_collection_balance(
            database, principal, chains, chain_name=body.chain, max_items=body.max_items
        )
    async with database.transaction() as tx:
        event = None
        if body.event_id is not None:
            event = await get_event_row(tx, principal.project_id, body.event_id)
        values = body.model_dump()
        if body.seat_category is not None:
            values["stock"] = await seated_stock(
                tx, principal.project_id, body.event_id, body.seat_category, body.stock
            )
        product = await repository.insert_product(
            tx,
            values
            | {
                "project_id": principal.project_id,
                "issued_count": 0,
                "nft_status": NftStatus.QUEUED if body.mint_nft else None,
            },
        )
        if product.mint_nft:
            await queue_nft(tx, JobKind.CREATE_COLLECTION, [product])
        created = ProductRead.model_validate(product_view(product, event))
        await record(tx, principal.project_id, EventType.PRODUCT_CREATED, [created])
        await tx.commit()
    return created


async def _require_collection_balance(
    database: Database,
    principal: Principal,
    chains: Chains,
    *,
    chain_name: str,
    max_items: int | None,
) -> None:
    chain = chains.config(chain_name)
    # Read before the chain is called: no pooled connection waits on the network.
    wallet = await database.read(primary_wallet, principal.project_id)

    def read(gateway: ChainGateway) -> tuple[Deposits, int, int]:
        deposits = gateway.deposits()
        fee = gateway.create_collection_fee(wallet.public_key, max_supply=max_items)
        return deposits, fee, gateway.balance(wallet.public_key).free

    deposits, fee, available = await chains.run(chain.name, read, in_request=True)
    needed = deposits.collection + fee + deposits.existential
    if available < needed:
        raise InsufficientCollectionBalance(
            f"the project wallet {ss58_address(wallet.public_key, chain.ss58_prefix)} holds "
            f"{chain.amount(available)} on {chain.name}; creating the NFT collection needs "
            f"{chain.amount(needed)} (deposit {chain.amount(deposits.collection)}, fee "
            f"{chain.amount(fee)}, existential deposit {chain.amount(deposits.existential)})"
        )


async def list_products(
    database: Database, principal: Principal, *, paging: PageParams
) -> list[ProductView]:
    """A page of the project's products, oldest first, as rows that ``ProductRead`` reads."""
    return await database.read(repository.read_products, principal.project_id, paging)


async def get_product(
    database: Database, principal: Principal, *, product_id: uuid.UUID
) -> ProductView:
    """The project's product with its event, as a row that ``ProductRead`` reads."""
    row = await database.read(repository.read_product, principal.project_id, product_id)
    if row is None:
        raise ProductNotFound
    return row


async def list_sales(
    database: Database, principal: Principal, *, product_id: uuid.UUID, paging: PageParams
) -> SalePage:
    """Order lines of a product (oldest first) with their order's status and buyer, as
    ``SaleList`` reads them."""
    sales = await database.read(repository.read_sales, principal.project_id, product_id, paging)
    if sales is None:
        raise ProductNotFound
    return sales


@rerun_on_conflict
async def issue_items(
    database: Database,
    principal: Principal,
    *,
    product_id: uuid.UUID,
    body: ItemsIssue,
    mail: TicketMail | None = None,
) -> list[Item]:
    """Give one item to each listed user (ids and/or emails), all or nothing. With ``mail``,
    each user is emailed one link per item they got (``mail.service``)."""
    if body.product_id is not None and body.product_id != product_id:
        raise InvalidInput("product_id: does not match the product in the path")
    async with database.transaction() as tx:
        by_id, by_email = await users_by(
            tx, principal.project_id, ids=body.users, emails=body.emails
        )
        missing = [str(i) for i in body.users if i not in by_id]
        missing += [e for e in body.emails if e not in by_email]
        if missing:  # an unknown product is the 404 to give first (issue finds it otherwise)
            await repository.get_product_row(tx, principal.project_id, product_id)
            raise UserNotFound(f"users not found in this project: {', '.join(missing[:5])}")
        recipients = [by_id[i] for i in body.users] + [by_email[e] for e in body.emails]
        items = await rules.issue(tx, principal, product_id, recipients, hold_id=body.hold_id)
        if mail is not None and items:
            await outbox.queue_tickets(
                tx,
                principal.project_id,
                await tickets_of(tx, mail, principal.project_id, items),
                kind=Kind.ISSUED,
                cause=f"items:{items[0].row.id}",
            )
        await tx.commit()
    return items


@rerun_on_conflict
async def redeem_item(
    database: Database, principal: Principal, *, product_id: uuid.UUID, body: RedeemRequest
) -> tuple[Item, ProductItemRead]:
    """Redeem an item once more, up to the product's ``redemption_quantity``: the item's row,
    and the item as the API shows it after the redemption.

    With a ``nonce``, a repeat of the same (item, nonce) counts once and shows the item as the
    redemption recorded the first time left it. The product is share-locked, so
    that its ``redemption_quantity`` cannot be lowered under a redemption (``update_product``).
    """
    async with database.transaction() as tx:
        product = await repository.share_product(tx, principal.project_id, product_id)
        row = await item_repository.lock_item(tx, product, body.product_item_id)
        owner = await get_user_row(tx, principal.project_id, UserRef("id", row.owner_id))
        item = Item(row, product=product, owner=owner)
        if body.nonce is not None:
            earlier = await item_repository.find_redemption(tx, row.id, body.nonce)
            if earlier is not None:
                return item, ProductItemRead.of(item, as_of=earlier)
        rules.check_redeemable(product, row)
        now = utcnow()
        row = row._replace(
            redemption_count=row.redemption_count + 1,  # the item is locked
            redeemed_at=int(now.timestamp()),
            updated_at=now,
        )
        item = item._replace(row=row)
        await item_repository.write_redemption(tx, row)
        await item_repository.add_redemption(
            tx,
            {
                "item_id": row.id,
                "nonce": body.nonce,
                "redemption_count": row.redemption_count,
                "redeemed_at": row.redeemed_at,
            },
        )
        redeemed = ProductItemRead.of(item)
        await record(tx, principal.project_id, EventType.ITEM_REDEEMED, [redeemed])
        await tx.commit()
    return item, redeemed


async def _require_movable_nft(tx: Transaction, item: ItemRow) -> None:
    """An item whose NFT sits in a wallet its owner holds cannot change owner here: Tessera
    cannot sign for that wallet, and the database and the chain must not disagree (409)."""
    if item.nft_wallet_id is None:
        return
    holder = await item_repository.nft_holder(tx, item.nft_wallet_id)
    if holder is not None and holder.custody == USER_CONTROLLED:
        raise NftHeldByUser(
            f"the NFT of this item sits in {holder.address}, a wallet its owner holds: "
            "Tessera cannot move it; the owner transfers it on chain"
        )


@rerun_on_conflict
async def transfer_item(
    database: Database,
    principal: Principal,
    *,
    product_id: uuid.UUID,
    body: TransferRequest,
    mail: TicketMail | None = None,
) -> TransferRead:
    """Move an item from its owner to another user of the project (see
    ``rules.check_transfer``). Every transfer is kept in ``item_transfers``; for an NFT product
    the worker then moves the NFT to the new owner's wallet. The item's ticket is the new
    owner's (a new secret and page); with ``mail``, they are emailed its link."""
    async with database.transaction() as tx:
        product = await repository.lock_product(tx, principal.project_id, product_id)
        rules.check_transferable(product)
        row = await item_repository.lock_item(tx, product, body.product_item_id)
        rules.check_held_in_tessera(row)
        await _require_movable_nft(tx, row)
        sender = await find_user_row(tx, principal.project_id, body.sender())
        if sender is None:
            raise UserNotFound("sender not found")
        recipient = await find_user_row(tx, principal.project_id, body.recipient())
        if recipient is None:
            raise UserNotFound("recipient not found")
        await rules.check_transfer(tx, principal, product, row, sender, recipient)

        now = utcnow()
        transferred_at = int(now.timestamp())
        row = row._replace(
            owner_id=recipient.id,
            updated_at=now,
            nft_transfer_status=NftStatus.QUEUED if product.mint_nft else row.nft_transfer_status,
            ticket_version=row.ticket_version + 1,  # as write_transfer counts it
        )
        item = Item(row, product=product, owner=recipient)
        await item_repository.write_transfer(tx, row)
        transfer = {
            "project_id": principal.project_id,
            "item_id": row.id,
            "from_user_id": sender.id,
            "to_user_id": recipient.id,
            "transferred_at": transferred_at,
        }
        await item_repository.add_transfer(tx, transfer)
        if product.mint_nft:
            await queue_nft(tx, JobKind.TRANSFER, [row])
        moved = TransferRead(
            product_item=TransferItem.of(item),
            previous_owner=ItemOwner.model_validate(sender),
            new_owner=ItemOwner.model_validate(recipient),
            transferred_at=transferred_at,
        )
        await record(tx, principal.project_id, EventType.ITEM_TRANSFERRED, [moved])
        if mail is not None:
            await outbox.queue_tickets(
                tx,
                principal.project_id,
                await tickets_of(tx, mail, principal.project_id, [item]),
                kind=Kind.TRANSFERRED,
                cause=f"transferred:{row.id}:{row.ticket_version}",
            )
        await tx.commit()
    return moved


async def list_items(
    database: Database, principal: Principal, *, product_id: uuid.UUID, query: ItemFilter
) -> ItemList:
    """The product's items by ``item_id``, optionally only those of one owner."""
    return await database.read(
        item_repository.read_product_items, principal.project_id, product_id, query
    )


async def get_item(
    database: Database, principal: Principal, *, product_id: uuid.UUID, item: int | uuid.UUID
) -> ProductItemRead:
    """The product's item (by ``item_id`` or by ``id``), as the items list shows it."""
    return await database.read(
        item_repository.read_product_item, principal.project_id, product_id, item
    )


async def list_item_transfers(
    database: Database,
    principal: Principal,
    *,
    product_id: uuid.UUID,
    item: int | uuid.UUID,
    paging: PageParams,
) -> ItemTransferList:
    """The transfers of the product's item (by ``item_id`` or by ``id``), oldest first."""
    return await database.read(
        item_repository.read_item_transfers, principal.project_id, product_id, item, paging
    )


@rerun_on_conflict
async def update_product(
    database: Database,
    principal: Principal,
    *,
    product_id: uuid.UUID,
    body: ProductUpdate,
    chains: Chains,
    hash_key: bytes,
) -> ProductRead:
    """Change the fields sent (null clears one that may be empty) as ``rules.check_update``
    allows, under the product's row lock; the product with its event. A value sent as stored is
    no change; with no change nothing is written and ``updated_at`` stays.

    Switching NFTs on (``mint_nft`` true on a product without them) needs ``metadata_uri`` and
    ``chain``, sent or stored (400), a configured chain (409) and a project wallet that can pay
    for the collection (409), as creation does, with the chain read before the write
    transaction begins; the rules are checked again on the locked product, and the worker then
    creates the collection.
    """
    changes = body.changes()
    if changes.get("mint_nft"):
        stored = await database.read(repository.get_product_row, principal.project_id, product_id)
        changed = rules.changed_fields(stored, changes)
        if changed.get("mint_nft"):
            rules.check_nft_settings(stored, changed)
            chain, max_items = _nft_settings(stored, changed)
            await _require_collection_balance(
                database, principal, chains, chain_name=chain, max_items=max_items
            )
    async with database.transaction() as tx:
        product = await repository.lock_product(tx, principal.project_id, product_id)
        event_id = changes.get("event_id", product.event_id)
        event = None
        if event_id is not None:
            event = await get_event_row(tx, principal.project_id, event_id)
        changed = await rules.check_update(tx, product, changes)
        if {"seat_category", "stock", "event_id"} & changed.keys():
            changed = await _seated_update(tx, principal, product, changes, changed)
        if changed.get("mint_nft"):
            # The chain may have changed since it was read: still one of the configured ones.
            chains.config(_nft_settings(product, changed)[0])
            changed["nft_status"] = NftStatus.QUEUED
        if not changed:
            return ProductRead.model_validate(product_view(product, event))
        row = await repository.update_product(tx, product, changed, now=utcnow())
        if changed.get("mint_nft"):
            await queue_nft(tx, JobKind.CREATE_COLLECTION, [row])
        updated = ProductRead.model_validate(product_view(row, event))
        await record(tx, principal.project_id, EventType.PRODUCT_UPDATED, [updated])
        if _may_free_stock(product, row):
            await waiting.move_line(
                tx, principal.project_id, product.id, hash_key=hash_key, now=utcnow()
            )
        await tx.commit()
    return updated


def _may_free_stock(before: ProductRow, after: ProductRow) -> bool:
    """Whether an update may have freed stock for the waiting list: more stock (or no limit
    now), or the product switched on."""
    more = before.stock is not None and (after.stock is None or after.stock > before.stock)
    return more or (after.active and not before.active)


async def _seated_update(
    tx: Transaction,
    principal: Principal,
    product: ProductRow,
    changes: dict[str, Any],
    changed: dict[str, Any],
) -> dict[str, Any]:
    """``changed`` as a seated product allows it: its category and event fixed once an item
    is issued or a seat held for it (409), its stock at most the category's seats (their number
    when the category changes and no stock is sent)."""
    if product.seat_category is not None or "seat_category" in changed:
        moved = [name for name in ("seat_category", "event_id") if name in changed]
        await require_no_seats_taken(tx, product.id, product.issued_count, moved)
    after = product._replace(**changed)
    if after.seat_category is None:
        return changed
    # A stock sent is checked; a new category without one sells all its seats.
    stock = None if "seat_category" in changed and "stock" not in changes else after.stock
    stock = await seated_stock(tx, principal.project_id, after.event_id, after.seat_category, stock)
    return changed | ({"stock": stock} if stock != product.stock else {})


def _nft_settings(product: ProductRow, changed: dict[str, Any]) -> tuple[str, int | None]:
    """The ``chain`` and ``max_items`` of the product as ``changed`` would leave it, switching
    NFTs on: 400 unless it then has a ``metadata_uri`` and a ``chain``."""
    after = product._replace(**changed)
    if problems := missing_for_mint(after):
        raise InvalidInput(*problems)
    assert after.chain is not None  # missing_for_mint requires it
    return after.chain, after.max_items


async def list_holdings(
    database: Database, principal: Principal, *, query: UserPageLookup
) -> ItemList:
    """The items the user owns now, of every product of the project, oldest first."""
    return await database.read(
        item_repository.read_holdings, principal.project_id, query.ref(), query.paging()
    )
