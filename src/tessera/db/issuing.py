"""Issuing a product's items, spelt per backend.

Issuing bumps the product's counter of items issued (which locks its row on PostgreSQL) and
writes the items, numbered from the bumped counter (``products.rules.issue`` checks the rules
afterwards; a refusal rolls it all back). On PostgreSQL the bump and the inserts are one
statement, so that issuers of one product hold its row lock for this round trip and the
commit's (and the per-account count's, if the product has a limit) and no more: the lock is what
they queue on, one of each process at a time (``Transaction.one_waiter``). (The per-account
count must be a statement of its own, after this one: a subquery here would read the snapshot
taken before the lock was granted, without the items of the issuer just before.) On SQLite,
where statements cost no round trip and the write lock is the whole database's, they are three
plain statements.
"""

import uuid
from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any, TypeVar

from sqlalchemy import ARRAY, String, TextualSelect, bindparam, text, update

from tessera.db.compiled import table_of, with_defaults
from tessera.db.rows import Transaction
from tessera.models import NftStatus, OrderItem, Product, ProductItem
from tessera.models.base import new_id, utcnow

RowT = TypeVar("RowT", bound=tuple[Any, ...])

_PRODUCTS, _ITEMS, _LINES = table_of(Product), table_of(ProductItem), table_of(OrderItem)
# SQLite: the bump, returning the product as it now is. The product's updated_at stays: issuing
# changes a counter, not the product.
_BUMP = (
    update(_PRODUCTS)
    .where(_PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id"))
    .values(
        issued_count=_PRODUCTS.c.issued_count + bindparam("count"),
        updated_at=_PRODUCTS.c.updated_at,
    )
    .returning(*_PRODUCTS.c)
)
_COLUMNS = ", ".join(column.name for column in _PRODUCTS.c)


def _bump_and_insert(*, with_line: bool) -> TextualSelect:
    """PostgreSQL: the bump and the items' insert; ``with_line``: the order line the items are
    for, too (its foreign key then takes its key-share lock under this transaction's own row
    lock). The items are numbered and marked queued for their NFT as ``_items`` does."""
    line = """
    line AS (
        INSERT INTO order_items (id, order_id, product_id, position, quantity, unit_price,
                                 created_at)
        SELECT CAST(:order_item_id AS UUID), CAST(:order_id AS UUID), bumped.id,
               CAST(:position AS INTEGER), CAST(:count AS BIGINT),
               CAST(:unit_price AS NUMERIC), CAST(:now AS TIMESTAMPTZ)
        FROM bumped
    ),"""
    statement = text(
        f"""
        WITH bumped AS (
            UPDATE products SET issued_count = issued_count + :count
            WHERE project_id = :project_id AND id = :id
            RETURNING {_COLUMNS}
        ),{line if with_line else ""}
        items AS (
            INSERT INTO product_items (id, project_id, product_id, item_id, owner_id,
                                       order_item_id, redemption_count, ticket_version, nft_status,
                                       created_at, updated_at)
            SELECT new.id, bumped.project_id, bumped.id, bumped.issued_count - :count + new.n,
                   new.owner_id, CAST(:order_item_id AS UUID), 0, 1,
                   CASE WHEN bumped.mint_nft THEN CAST(:queued AS VARCHAR) END,
                   CAST(:now AS TIMESTAMPTZ), CAST(:now AS TIMESTAMPTZ)
            FROM bumped, unnest(CAST(:ids AS UUID[]), CAST(:owners AS UUID[]))
                         WITH ORDINALITY AS new(id, owner_id, n)
        )
        SELECT {_COLUMNS} FROM bumped
        """  # noqa: S608 - the names are the model's columns, not input
    )
    # Typed as the columns they go to: each is bound as SQLAlchemy binds that column's values.
    typed = {
        "count": _PRODUCTS.c.issued_count.type,
        "project_id": _PRODUCTS.c.project_id.type,
        "id": _PRODUCTS.c.id.type,
        "ids": ARRAY(_ITEMS.c.id.type),
        "owners": ARRAY(_ITEMS.c.owner_id.type),
        "order_item_id": _ITEMS.c.order_item_id.type,
        "queued": String(),
        "now": _ITEMS.c.created_at.type,
    }
    if with_line:
        typed |= {name: _LINES.c[name].type for name in ("order_id", "position", "unit_price")}
    return statement.bindparams(
        *(bindparam(name, type_=kind) for name, kind in typed.items())
    ).columns(*_PRODUCTS.c)


_BUMP_AND_INSERT = {
    False: _bump_and_insert(with_line=False),
    True: _bump_and_insert(with_line=True),
}
_COUNTED = attrgetter("project_id", "id", "issued_count", "mint_nft")


async def issue_items(
    tx: Transaction,
    into: type[RowT],
    *,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    owners: Sequence[uuid.UUID],
    order_item_id: uuid.UUID | None,
    new_line: dict[str, Any] | None,
) -> tuple[RowT, list[dict[str, Any]]] | None:
    """Take an item number of the project's product for each of ``owners`` (locking the
    product's row) and write their items, for the order line ``order_item_id`` or for
    ``new_line`` (a line with all its columns, written first): the product as bumped (``into``,
    its columns) and the items' rows as written; None for no such product."""
    count, now = len(owners), utcnow()
    ids = [new_id() for _ in owners]
    if tx.on_postgresql:
        line = (
            {}
            if new_line is None
            else {name: new_line[name] for name in ("order_id", "position", "unit_price")}
        )
        async with tx.one_waiter(("product", product_id)):
            bumped = await tx.first(
                _BUMP_AND_INSERT[new_line is not None],
                into,
                project_id=project_id,
                id=product_id,
                count=count,
                ids=tuple(ids),  # an array: a tuple, not a list to expand
                owners=tuple(owners),
                order_item_id=order_item_id,
                queued=NftStatus.QUEUED.value,
                now=now,
                **line,
            )
        if bumped is None:
            return None
        return bumped, _items(bumped, ids, owners, order_item_id, now)
    bumped = await tx.first(_BUMP, into, project_id=project_id, id=product_id, count=count)
    if bumped is None:
        return None
    if new_line is not None:
        await tx.insert(OrderItem, [new_line])
    items = _items(bumped, ids, owners, order_item_id, now)
    await tx.insert(ProductItem, items)
    return bumped, items


def _items(
    product: tuple[Any, ...],
    ids: Sequence[uuid.UUID],
    owners: Sequence[uuid.UUID],
    order_item_id: uuid.UUID | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """The rows of the items issued with ``product`` bumped, as PostgreSQL's statement writes
    them: numbered on from the items issued before, queued for their NFT if it mints them."""
    project_id, product_id, issued_count, mint_nft = _COUNTED(product)
    first = issued_count - len(owners) + 1
    return [
        with_defaults(
            ProductItem,
            {
                "id": item_id,
                "project_id": project_id,
                "product_id": product_id,
                "item_id": first + offset,
                "owner_id": owner_id,
                "order_item_id": order_item_id,
                "redemption_count": 0,
                "nft_status": NftStatus.QUEUED if mint_nft else None,
                "created_at": now,
                "updated_at": now,
            },
        )
        for offset, (item_id, owner_id) in enumerate(zip(ids, owners, strict=True))
    ]
