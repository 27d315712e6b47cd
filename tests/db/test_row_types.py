"""Rows are made from a statement's columns in order (``_make``), so a column added to a table
and not to its row, or one out of place, would shift every value after it: this holds each
table's row to the table. A join is read as the rows of its parts (``db.Joined``), each
declared once (an item with its product and owner holds an ``ItemRow``); the rows that still
write a table's columns out again (a user with its wallets, a product's shown columns) are
held here too, and listed in tests/test_layout.py (``WRITTEN_AGAIN``)."""

import pytest

from tessera.claims.repository import CLAIMED_ITEM, ClaimedItem, ClaimedProduct
from tessera.db import Joined, table_of
from tessera.models import Product, ProductItem, User
from tessera.orders.repository import ORDER_READ, IssuedItem
from tessera.products.rows import (
    Item,
    ItemRow,
    ProductEventRow,
    ProductReadRow,
    ProductRow,
    ProductView,
)
from tessera.users.repository import CreatedUser, UserRow

ITEM = tuple(table_of(ProductItem).c.keys())
USER = tuple(table_of(User).c.keys())
PRODUCT = tuple(table_of(Product).c.keys())


@pytest.mark.parametrize(
    ("row_type", "columns", "more"),
    [
        (ItemRow, ITEM, ()),
        (UserRow, USER, ()),
        (CreatedUser, USER, ("wallets",)),
        (ProductRow, PRODUCT, ()),
        (ProductView, ProductReadRow._fields, ("event",)),
    ],
)
def test_a_row_type_holds_its_tables_columns_in_order(row_type, columns, more):
    assert row_type._fields == (*columns, *more)


@pytest.mark.parametrize("joined", [Item, IssuedItem, ClaimedItem])
def test_an_item_with_more_holds_the_item_s_row_whole(joined):
    assert joined._fields[0] == "row"
    assert joined.__annotations__["row"] is ItemRow


def test_a_join_reads_its_parts_columns_in_order():
    """A join's first part by its columns' names, the others as ``<part>__<column>``."""
    claimed: Joined[ClaimedItem] = CLAIMED_ITEM
    assert claimed._fields == (*ITEM, *(f"product__{name}" for name in ClaimedProduct._fields))
    made = claimed._make([*range(len(ITEM)), "p", "n", "t", 1])
    assert made.row == ItemRow._make(range(len(ITEM)))
    assert made.product == ClaimedProduct("p", "n", "t", 1)
    assert ORDER_READ._fields[-len(ITEM) - 3 : -3] == tuple(f"item__{c}" for c in ITEM)


def test_a_product_read_with_its_event_starts_with_the_products_shown_columns():
    shown = ProductReadRow._fields
    assert set(shown) <= set(PRODUCT)
    assert ProductEventRow._fields[: len(shown)] == shown
    assert all(f.startswith("event__") for f in ProductEventRow._fields[len(shown) :])
