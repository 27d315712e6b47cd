"""The rules of a product's items, each written once: locks, issuing, redemption, transfer.

Every path that gives a user an item (the items endpoint, a completed order, a transfer in) goes
through ``check_recipients`` inside the caller's transaction, with the product row locked
(``issue`` locks it as it bumps the counter, a transfer with ``lock_product``): on PostgreSQL the
lock serialises issuers of one product, so stock, per-account counts and the next ``item_id`` are
read and bumped without races; on SQLite the write lock does the same. A change of the product
(``check_update``) takes the same lock (``lock_product``), so stock cannot drop below the items
being issued. Redemption share-locks the product (``share_product``: redemptions of one product run
side by side, while a change of its ``redemption_quantity`` waits for them and they for it), then
locks the item (``lock_item``); a transfer locks the product, then the item.

The rules run in a ``Transaction`` (Core statements on the raw driver) and work on rows: the
product, items and users as the statements below read them.
"""

import uuid
from collections import Counter
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import TextualSelect, bindparam, func, select, text, update

from tessera.auth.principal import Principal
from tessera.changes.outbox import EventType, record
from tessera.db import (
    Transaction,
    joined,
    lock_for_share,
    lock_for_update,
    table_of,
    with_defaults,
)
from tessera.errors import (
    CollectionFull,
    ItemFullyRedeemed,
    ItemNotOwnedBySender,
    ItemsIssuedWithoutNft,
    NftSettingsFixed,
    PerAccountLimitReached,
    ProductInactive,
    ProductItemNotFound,
    ProductNotFound,
    ProductNotTransferable,
    ProductOutOfStock,
    RedemptionQuantityBelowCount,
    ReputationTooLow,
    StockBelowIssued,
    TransferToSelf,
)
from tessera.jobs.queue import JobKind
from tessera.models import NftStatus, OrderItem, Product, ProductItem
from tessera.models.base import new_id, utcnow
from tessera.products.schemas import ProductItemRead, is_fully_redeemed
from tessera.products.tasks import queue_nft
from tessera.users.rules import require_activated

_PRODUCTS, _ITEMS = table_of(Product), table_of(ProductItem)
# Built once (see users.repository).
_LOCK_PRODUCT = lock_for_update(
    select(_PRODUCTS).where(
        _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
    )
)
_SHARE_PRODUCT = lock_for_share(
    select(_PRODUCTS).where(
        _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
    )
)
_LOCK_ITEM = lock_for_update(
    select(_ITEMS).where(
        _ITEMS.c.product_id == bindparam("product_id"), _ITEMS.c.id == bindparam("id")
    )
)
_HELD = (
    select(_ITEMS.c.owner_id, func.count())
    .where(
        _ITEMS.c.product_id == bindparam("product_id"),
        _ITEMS.c.owner_id.in_(bindparam("owners", expanding=True)),
    )
    .group_by(_ITEMS.c.owner_id)
)
# Issuing takes the product's row lock with the bump of its counter, in one statement, and
# returns the product as it now is; the checks follow, and a refusal rolls the bump back. The
# lock is held for as few round trips as the rules allow (this, the per-account count if any,
# the items' insert, the commit): issuers of one product (and its redemptions, which share-lock
# it) queue on it. The product's updated_at stays: issuing changes a counter, not the product.
_ISSUE = (
    update(_PRODUCTS)
    .where(_PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id"))
    .values(
        issued_count=_PRODUCTS.c.issued_count + bindparam("count"),
        updated_at=_PRODUCTS.c.updated_at,
    )
    .returning(*_PRODUCTS.c)
)


async def lock_product(tx: Transaction, project_id: uuid.UUID, product_id: uuid.UUID) -> Any:
    """The project's product, locked until the transaction ends (404 otherwise)."""
    row = await tx.first(_LOCK_PRODUCT, project_id=project_id, id=product_id)
    if row is None:
        raise ProductNotFound
    return joined(row)


async def share_product(tx: Transaction, project_id: uuid.UUID, product_id: uuid.UUID) -> Any:
    """The project's product, share-locked until the transaction ends (404 otherwise): it cannot
    change meanwhile, while others that share-lock it go on."""
    row = await tx.first(_SHARE_PRODUCT, project_id=project_id, id=product_id)
    if row is None:
        raise ProductNotFound
    return joined(row)


async def lock_item(tx: Transaction, product: Any, item_id: uuid.UUID) -> Any:
    """An item of ``product`` (already locked, or share-locked: products are always locked
    first), locked, with its ``product``."""
    row = await tx.first(_LOCK_ITEM, product_id=product.id, id=item_id)
    if row is None:
        raise ProductItemNotFound
    return joined(row, product=product)


async def check_recipients(
    tx: Transaction,
    principal: Principal,
    product: Any,
    recipients: Sequence[Any],
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
        counts = await tx.all(_HELD, product_id=product.id, owners=list(wanted))
        held: dict[uuid.UUID, int] = {owner_id: count for owner_id, count in counts}
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


# On PostgreSQL the bump and the items' insert are one statement, so that issuers of one
# product hold its row lock for this round trip and the commit's (and the per-account count's,
# if the product has a limit) and no more: the lock is what they queue on, one of each process
# at a time (``Transaction.one_waiter``). The items are numbered from the bumped counter; checks
# that fail afterwards roll the whole statement back. (The per-account count must be a statement
# of its own, after this one: a subquery here would read the snapshot taken before the lock was
# granted, without the items of the issuer just before.)
_COLUMNS = ", ".join(column.name for column in _PRODUCTS.c)


def _issue_statement(*, with_line: bool) -> TextualSelect:
    """The bump and the items' insert; ``with_line``: the order line the items are for, too
    (its foreign key then takes its key-share lock under this transaction's own row lock)."""
    line = """
    line AS (
        INSERT INTO order_items (id, order_id, product_id, position, quantity, unit_price,
                                 created_at)
        SELECT CAST(:order_item_id AS UUID), CAST(:order_id AS UUID), bumped.id,
               CAST(:position AS INTEGER), CAST(:count AS BIGINT),
               CAST(:unit_price AS NUMERIC), CAST(:now AS TIMESTAMPTZ)
        FROM bumped
    ),"""
    return text(
        f"""
        WITH bumped AS (
            UPDATE products SET issued_count = issued_count + :count
            WHERE project_id = :project_id AND id = :id
            RETURNING {_COLUMNS}
        ),{line if with_line else ""}
        items AS (
            INSERT INTO product_items (id, project_id, product_id, item_id, owner_id,
                                       order_item_id, redemption_count, nft_status, created_at,
                                       updated_at)
            SELECT new.id, bumped.project_id, bumped.id, bumped.issued_count - :count + new.n,
                   new.owner_id, CAST(:order_item_id AS UUID), 0,
                   CASE WHEN bumped.mint_nft THEN CAST(:queued AS VARCHAR) END,
                   CAST(:now AS TIMESTAMPTZ), CAST(:now AS TIMESTAMPTZ)
            FROM bumped, unnest(CAST(:ids AS UUID[]), CAST(:owners AS UUID[]))
                         WITH ORDINALITY AS new(id, owner_id, n)
        )
        SELECT {_COLUMNS} FROM bumped
        """  # noqa: S608 - the names are the model's columns, not input
    ).columns(*_PRODUCTS.c)


_ISSUE_AND_INSERT = {
    False: _issue_statement(with_line=False),
    True: _issue_statement(with_line=True),
}


async def _bump_and_insert(
    tx: Transaction,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    recipients: Sequence[Any],
    order_item_id: uuid.UUID | None,
    new_line: dict[str, Any] | None,
) -> tuple[Any, list[Any]]:
    """Take ``count`` item numbers of the product (locking it) and write an item for each
    recipient (and ``new_line``, the order line they are for, first); the product as bumped and
    the items' rows. None for no such product."""
    count, now = len(recipients), utcnow()
    ids = [new_id() for _ in recipients]
    if tx.on_postgresql:
        line = (
            {}
            if new_line is None
            else {name: new_line[name] for name in ("order_id", "position", "unit_price")}
        )
        async with tx.one_waiter(("product", product_id)):
            bumped = await tx.first(
                _ISSUE_AND_INSERT[new_line is not None],
                project_id=project_id,
                id=product_id,
                count=count,
                ids=tuple(ids),  # an array: a tuple, not a list to expand
                owners=tuple(user.id for user in recipients),
                order_item_id=order_item_id,
                queued=NftStatus.QUEUED.value,
                now=now,
                **line,
            )
    else:
        bumped = await tx.first(_ISSUE, project_id=project_id, id=product_id, count=count)
        if bumped is not None and new_line is not None:
            await tx.insert(OrderItem, [new_line])
    if bumped is None:
        return None, []
    product = joined(bumped)
    first = product.issued_count - count + 1
    rows = [
        with_defaults(
            ProductItem,
            {
                "id": item_id,
                "project_id": product.project_id,
                "product_id": product.id,
                "item_id": first + offset,
                "owner_id": user.id,
                "order_item_id": order_item_id,
                "redemption_count": 0,
                "nft_status": NftStatus.QUEUED if product.mint_nft else None,
                "created_at": now,
                "updated_at": now,
            },
        )
        for offset, (item_id, user) in enumerate(zip(ids, recipients, strict=True))
    ]
    if not tx.on_postgresql:
        await tx.insert(ProductItem, rows)
    return product, [SimpleNamespace(**row) for row in rows]


async def issue(
    tx: Transaction,
    principal: Principal,
    product_id: uuid.UUID,
    recipients: Sequence[Any],
    *,
    order_item_id: uuid.UUID | None = None,
    new_line: dict[str, Any] | None = None,
) -> list[Any]:
    """Issue one item per recipient of the project's product (404 otherwise), with the next
    sequential ``item_id``s: ``stock`` and, for NFT products, ``max_items`` bound the items ever
    issued; each recipient must pass ``check_recipients``. All or nothing: the items are written
    before the checks, so the caller's transaction must end (roll back) if this raises. The
    items are for the order line ``order_item_id``, or for ``new_line`` (a completed order's
    line for this product and these recipients, with all its columns: written here, with the
    items). The items, with ``product`` and ``owner``."""
    count = len(recipients)
    if new_line is not None:
        order_item_id = new_line["id"]
    product, items = await _bump_and_insert(
        tx, principal.project_id, product_id, recipients, order_item_id, new_line
    )
    if product is None:
        raise ProductNotFound
    issued = product.issued_count - count  # before this issue
    if product.stock is not None and issued + count > product.stock:
        left = product.stock - issued
        raise ProductOutOfStock(f"product is out of stock: {left} left, {count} requested")
    if product.mint_nft and product.max_items is not None:
        if issued + count > product.max_items:
            raise CollectionFull(
                f"the NFT collection holds at most {product.max_items} items "
                f"({issued} issued, {count} requested)"
            )
    await check_recipients(tx, principal, product, recipients, written=True)
    for item, user in zip(items, recipients, strict=True):
        item.product, item.owner = product, user
    if product.mint_nft:
        await queue_nft(tx, JobKind.MINT, items)
    issued_items = [ProductItemRead.of(item) for item in items]
    await record(tx, principal.project_id, EventType.ITEM_ISSUED, issued_items)
    return items


def check_redeemable(product: Any, item: Any) -> None:
    if is_fully_redeemed(item.redemption_count, product):
        raise ItemFullyRedeemed


def check_transferable(product: Any) -> None:
    """Checked first, before the item and the users are looked up."""
    if not product.is_transferable:
        raise ProductNotTransferable


async def check_transfer(
    tx: Transaction, principal: Principal, product: Any, item: Any, sender: Any, recipient: Any
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


def _unique(users: Sequence[Any]) -> list[Any]:
    return list({user.id: user for user in users}.values())


# The settings of a product's NFT collection, fixed once it is queued or created.
NFT_SETTINGS = ("mint_nft", "chain", "metadata_uri", "max_items")
_HIGHEST_REDEMPTION = select(func.max(_ITEMS.c.redemption_count)).where(
    _ITEMS.c.product_id == bindparam("product_id")
)


def changed_fields(product: Any, changes: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``changes`` whose value is not the product's: clients often send a whole
    product back, and a stored value sent again is no change."""
    return {name: value for name, value in changes.items() if getattr(product, name) != value}


def check_nft_settings(product: Any, changed: dict[str, Any]) -> None:
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


async def check_update(tx: Transaction, product: Any, changes: dict[str, Any]) -> dict[str, Any]:
    """The changes to ``product`` (locked: ``lock_product``) that keep its items valid, as
    ``changed_fields``; 409 for ``stock`` below the items issued, ``redemption_quantity`` below
    the highest ``redemption_count`` of an item (no redemption is under way: they share-lock the
    product), or a change ``check_nft_settings`` refuses."""
    changed = changed_fields(product, changes)
    check_nft_settings(product, changed)
    stock = changed.get("stock")
    if stock is not None and stock < product.issued_count:
        raise StockBelowIssued(
            f"stock cannot be {stock}, below the items already issued ({product.issued_count})"
        )
    quantity = changed.get("redemption_quantity")
    if quantity is not None and quantity < product.redemption_quantity:
        highest = await tx.scalar(_HIGHEST_REDEMPTION, product_id=product.id) or 0
        if quantity < highest:
            raise RedemptionQuantityBelowCount(
                f"redemption_quantity cannot be {quantity}, below the redemption_count of an "
                f"item already redeemed ({highest})"
            )
    return changed
