"""Row types that hold a table's whole row and more (an item with its product, a user with its
wallets) declare the table's columns again, because a ``NamedTuple`` cannot extend another's
fields and mypy needs them written out. Rows are made from the table's columns in order
(``_make``), so a column added to the table and not to each of these, or one out of place,
would shift every value after it: this holds them to the table."""

import pytest

from tessera.claims.repository import ClaimedItem, ClaimedItemRow
from tessera.db import table_of
from tessera.models import Product, ProductItem, User
from tessera.orders.repository import IssuedItem
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
        (Item, ITEM, ("product", "owner")),
        (IssuedItem, ITEM, ("product", "owner")),
        (ClaimedItem, ITEM, ("product",)),
        (ClaimedItemRow, ITEM, ("product_name", "product_type", "product_redemption_quantity")),
        (UserRow, USER, ()),
        (CreatedUser, USER, ("wallets",)),
        (ProductRow, PRODUCT, ()),
        (ProductView, ProductReadRow._fields, ("event",)),
    ],
)
def test_a_row_type_holds_its_tables_columns_in_order(row_type, columns, more):
    assert row_type._fields == (*columns, *more)


def test_a_product_read_with_its_event_starts_with_the_products_shown_columns():
    shown = ProductReadRow._fields
    assert set(shown) <= set(PRODUCT)
    assert ProductEventRow._fields[: len(shown)] == shown
    assert all(f.startswith("event__") for f in ProductEventRow._fields[len(shown) :])
