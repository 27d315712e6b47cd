"""The rules of a product's items, each written once: locks, issuing, redemption, transfer.

Every path that gives a user an item (the items endpoint, a completed order, a transfer in) goes
through ``check_recipients`` inside the caller's transaction, with the product row locked
(``issue`` locks it as it bumps the counter, a transfer with ``repository.lock_product``): on
PostgreSQL the lock serialises issuers of one product, so stock, per-account counts and the next
``item_id`` are read and bumped without races; on SQLite the write lock does the same. A change
of the product (``check_update``) takes the same lock (``repository.lock_product``), so stock
cannot drop below the items being issued. Redemption share-locks the product
(``repository.share_product``: redemptions of one product run side by side, while a change of
its ``redemption_quantity`` waits for them and they for it), then locks the item
(``item_repository.lock_item``); a transfer locks the product, then the item.

The rules run in a ``Transaction`` (Core statements on the raw driver, in ``products.repository``)
and work on its rows: the product, items and users.
"""

import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tessera.auth.principal import Principal
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Transaction
from tessera.errors import (
    CollectionFull,
    ItemFullyRedeemed,
    ItemNotOwnedBySender,
    ItemsIssuedWithoutNft,
    NftHeldOutside,
    NftSettingsFixed,
    PerAccountLimitReached,
    ProductInactive,
    ProductNotFound,
    ProductNotTransferable,
    ProductOutOfStock,
    RedemptionQuantityBelowCount,
    ReputationTooLow,
    StockBelowIssued,
    TransferToSelf,
)
from tessera.jobs.queue import JobKind
from tessera.models import NftStatus
from tessera.products import item_repository
from tessera.products.item_schemas import ProductItemRead
from tessera.products.nft_jobs import queue_nft
from tessera.products.rows import Item, ItemRow, ProductRow, Recipient
from tessera.products.schemas import is_fully_redeemed
from tessera.seats import rules as seats
from tessera.seats.rules import require_hold
from tessera.users.rules import require_activated


async def check_recipients(
    tx: Transaction,
    principal: Principal,
    product: ProductRow,
    recipients: Sequence[Recipient],
    *,
    written: bool = False,
) -> None:
    """``active``, the project's activation rule, ``max_per_account`` and ``min_rep_balance``
    for users about to receive items (a user listed n times receives n items). ``written``: the
    recipients' new items are already written in this transaction (``issue``), so the count of
    items held includes them."""
    if not product.active:
        raise ProductInactive
    for user in _unique(recipients):
        require_activated(principal, user, "receive items")
    if product.max_per_account is not None:
        wanted = Counter(user.id for user in recipients)
        held = await item_repository.held_by(tx, product.id, wanted)
        for user in _unique(recipients):
            before = held.get(user.id, 0) - (wanted[user.id] if written else 0)
            total = before + wanted[user.id]
            if total > product.max_per_account:
                raise PerAccountLimitReached(
                    f"max_per_account is {product.max_per_account}: {user.email} holds "
                    f"{before} and would hold {total}"
                )
    for user in _unique(recipients):
        if user.reputation < product.min_rep_balance:
            raise ReputationTooLow(
                f"min_rep_balance is {product.min_rep_balance}: {user.email} has {user.reputation}"
            )


async def issue(
    tx: Transaction,
    principal: Principal,
    product_id: uuid.UUID,
    recipients: Sequence[Recipient],
    *,
    order_item_id: uuid.UUID | None = None,
    new_line: dict[str, Any] | None = None,
    hold_id: uuid.UUID | None = None,
    offered: int = 0,
) -> list[Item]:
    """Issue one item per recipient of the project's product (404 otherwise), with the next
    sequential ``item_id``s: ``stock`` and, for NFT products, ``max_items`` bound the items ever
    issued; each recipient must pass ``check_recipients``. All or nothing: the items are written
    before the checks (the product's row lock is held for as few round trips as the rules allow:
    issuers of one product queue on it), so the caller's transaction must end (roll back) if
    this raises. The items are for the order line ``order_item_id``, or for ``new_line`` (a
    completed order's line for this product and these recipients, with all its columns: written
    here, with the items). A seated product's items get the seats of the hold ``hold_id``
    (``seats.rules.sell``), which it needs. ``offered``: the items are a waiting list offer's,
    whose stock kept for it (``waiting_list_kept``) is theirs. The items, with ``product`` and
    ``owner``."""
    count = len(recipients)
    if new_line is not None:
        order_item_id = new_line["id"]
    issued = await item_repository.issue(
        tx,
        principal.project_id,
        product_id,
        recipients,
        order_item_id=order_item_id,
        new_line=new_line,
    )
    if issued is None:
        raise ProductNotFound
    product, items = issued
    require_hold(product.id, product.seat_category, hold_id)
    before = product.issued_count - count  # before this issue
    kept = product.waiting_list_kept - offered  # for the other open waiting list offers
    if product.stock is not None and before + count + kept > product.stock:
        left = product.stock - before - kept
        for_offers = f" ({kept} kept for waiting list offers)" if kept else ""
        raise ProductOutOfStock(
            f"product is out of stock: {left} left{for_offers}, {count} requested"
        )
    if product.mint_nft and product.max_items is not None:
        if before + count > product.max_items:
            raise CollectionFull(
                f"the NFT collection holds at most {product.max_items} items "
                f"({before} issued, {count} requested)"
            )
    await check_recipients(tx, principal, product, recipients, written=True)
    if hold_id is not None:
        items = await _seated(tx, principal, items, hold_id, line_id=order_item_id)
    if product.mint_nft:
        await queue_nft(tx, JobKind.MINT, [item.row for item in items])
    issued_items = [ProductItemRead.of(item) for item in items]
    await record(tx, principal.project_id, EventType.ITEM_ISSUED, issued_items)
    return items


async def _seated(
    tx: Transaction,
    principal: Principal,
    items: list[Item],
    hold_id: uuid.UUID,
    *,
    line_id: uuid.UUID | None,
) -> list[Item]:
    """The items with the hold's seats, one each in the plan's order."""
    product_id = items[0].row.product_id
    ids = [item.row.id for item in items]
    sold = await seats.sell(tx, principal.project_id, hold_id, product_id, ids, line_id=line_id)
    return [
        item._replace(
            row=item.row._replace(
                seat_id=seat.id, seat_area=seat.area, seat_row=seat.row, seat_number=seat.number
            )
        )
        for item, seat in zip(items, sold, strict=True)
    ]


def check_redeemable(product: ProductRow, item: ItemRow) -> None:
    check_held_in_tessera(item)
    if is_fully_redeemed(item.redemption_count, product):
        raise ItemFullyRedeemed


def check_held_in_tessera(item: ItemRow) -> None:
    """An item whose NFT a reconciliation found outside the project's wallets (``external``)
    is neither redeemed nor transferred through the API until its NFT comes back (409)."""
    if item.nft_status == NftStatus.EXTERNAL:
        raise NftHeldOutside


def check_transferable(product: ProductRow) -> None:
    """Checked first, before the item and the users are looked up."""
    if not product.is_transferable:
        raise ProductNotTransferable


async def check_transfer(
    tx: Transaction,
    principal: Principal,
    product: ProductRow,
    item: ItemRow,
    sender: Recipient,
    recipient: Recipient,
) -> None:
    """Then a transfer needs the sender owning the item, another user as recipient, an item not
    fully redeemed, a sender the activation rule lets send, and a recipient who passes the
    issuing rules."""
    if item.owner_id != sender.id:
        raise ItemNotOwnedBySender
    if recipient.id == sender.id:
        raise TransferToSelf
    check_redeemable(product, item)
    require_activated(principal, sender, "send a transfer")
    await check_recipients(tx, principal, product, [recipient])


def _unique(users: Sequence[Recipient]) -> list[Recipient]:
    return list({user.id: user for user in users}.values())


# The settings of a product's NFT collection, fixed once it is queued or created.
NFT_SETTINGS = ("mint_nft", "chain", "metadata_uri", "max_items")


def changed_fields(product: ProductRow, changes: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``changes`` whose value is not the product's: clients often send a whole
    product back, and a stored value sent again is no change."""
    return {name: value for name, value in changes.items() if getattr(product, name) != value}


def check_nft_settings(product: ProductRow, changed: dict[str, Any]) -> None:
    """Once the product's NFT collection is queued or created, its settings stay; ``mint_nft``
    switches on only while no item was issued (each would lack its NFT)."""
    if product.mint_nft and product.nft_status is not None:
        if fixed := [name for name in NFT_SETTINGS if name in changed]:
            raise NftSettingsFixed(
                f"{', '.join(fixed)} cannot change once the product's NFT collection exists or "
                f"is queued (collection status: {product.nft_status})"
            )
    if changed.get("mint_nft") and product.issued_count:
        raise ItemsIssuedWithoutNft(
            "mint_nft cannot be switched on: items were already issued without an NFT "
            f"({product.issued_count})"
        )


async def check_update(
    tx: Transaction, product: ProductRow, changes: dict[str, Any]
) -> dict[str, Any]:
    """The changes to ``product`` (locked: ``repository.lock_product``) that keep its items
    valid, as ``changed_fields``; 409 for ``stock`` below the items issued and kept for
    waiting list offers,
    ``redemption_quantity`` below the highest ``redemption_count`` of an item (no redemption is
    under way: they share-lock the product), or a change ``check_nft_settings`` refuses."""
    changed = changed_fields(product, changes)
    check_nft_settings(product, changed)
    stock = changed.get("stock")
    if stock is not None and stock < product.issued_count + product.waiting_list_kept:
        kept = product.waiting_list_kept
        offers = f" and kept for waiting list offers ({kept})" if kept else ""
        raise StockBelowIssued(
            f"stock cannot be {stock}, below the items already issued ({product.issued_count})"
            f"{offers}"
        )
    quantity = changed.get("redemption_quantity")
    if quantity is not None and quantity < product.redemption_quantity:
        highest = await item_repository.highest_redemption(tx, product.id)
        if quantity < highest:
            raise RedemptionQuantityBelowCount(
                f"redemption_quantity cannot be {quantity}, below the redemption_count of an "
                f"item already redeemed ({highest})"
            )
    return changed
