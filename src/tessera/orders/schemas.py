import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Literal, NamedTuple, Protocol, Self

from pydantic import Field, StrictInt, StringConstraints, model_validator

from tessera.models import OrderStatus
from tessera.products.item_schemas import ItemSource, ItemView, ProductItemRead, item_view
from tessera.products.schemas import MAX_ISSUE
from tessera.schemas import Integral, PageParams, Pagination, SnakeInput, SnakeModel
from tessera.users.schemas import UserLookup

OrderNumber = Annotated[
    str,
    StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$"),
]


class OrderLineCreate(SnakeInput):
    product_id: uuid.UUID
    quantity: Annotated[StrictInt, Field(ge=1, le=MAX_ISSUE), Integral]
    hold_id: uuid.UUID | None = Field(
        default=None,
        description="A seated product's line: the hold whose seats it buys (`quantity` is "
        "their number). A pending order keeps them until it is completed or cancelled.",
    )


class OrderCreate(SnakeInput):
    """A user's order. ``completed`` (the default) issues its items at once; ``pending`` waits
    for ``POST /v1/orders/{id}/complete``."""

    user: UserLookup
    items: list[OrderLineCreate] = Field(
        min_length=1,
        max_length=100,
        description=f"At most {MAX_ISSUE} items in all (the sum of the quantities), else 400.",
    )
    status: Literal["completed", "pending"] = "completed"
    order_number: OrderNumber | None = None

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        total = sum(line.quantity for line in self.items)
        if total > MAX_ISSUE:
            raise ValueError(f"items: at most {MAX_ISSUE} items per order, got {total}")
        return self


class OrderLineRead(SnakeModel):
    id: uuid.UUID
    product_id: uuid.UUID
    product_name: str
    quantity: int
    unit_price: float


class OrderSummary(SnakeModel):
    """An order and its lines: what every answer about an order has."""

    id: uuid.UUID
    order_number: str
    status: OrderStatus
    user_id: uuid.UUID
    total: float
    items: list[OrderLineRead]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(
        cls,
        order: "OrderSource",
        lines: Sequence["LineSource"],
        products: Mapping[uuid.UUID, "NamedProduct"],
    ) -> Self:
        """From ORM objects, or from rows with the same attributes: the order, its lines (by
        position) and their products."""
        return cls.model_validate(order_view(order, lines, products))


class OrderRead(OrderSummary):
    product_items: list[ProductItemRead]

    @classmethod
    def of(
        cls,
        order: "OrderSource",
        lines: Sequence["LineSource"],
        products: Mapping[uuid.UUID, "NamedProduct"],
        items: Sequence[ItemSource] = (),
    ) -> Self:
        """As ``OrderSummary.of``, with the items issued for the order (none until it is
        completed)."""
        return cls.model_validate(order_view(order, lines, products, items))


class LineView(NamedTuple):
    """A line as ``OrderLineRead`` reads it."""

    id: uuid.UUID
    product_id: uuid.UUID
    product_name: str
    quantity: int
    unit_price: Decimal


class OrderView(NamedTuple):
    """An order as ``OrderRead`` (and ``OrderSummary``) reads it."""

    id: uuid.UUID
    order_number: str
    status: OrderStatus
    user_id: uuid.UUID
    total: float
    items: list[LineView]
    created_at: datetime
    updated_at: datetime
    product_items: list[ItemView]


class OrderSource(Protocol):
    """What ``order_view`` reads of an order: an ``orders`` row or ORM object."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def order_number(self) -> str: ...
    @property
    def status(self) -> OrderStatus: ...
    @property
    def user_id(self) -> uuid.UUID: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...


class LineSource(Protocol):
    """What ``order_view`` reads of an order's line (``order_items``)."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def product_id(self) -> uuid.UUID: ...
    @property
    def quantity(self) -> int: ...
    @property
    def unit_price(self) -> Decimal: ...


class NamedProduct(Protocol):
    """A line's product, of which the answer shows the name."""

    @property
    def name(self) -> str: ...


def order_view(
    order: OrderSource,
    lines: Sequence[LineSource],
    products: Mapping[uuid.UUID, NamedProduct],
    items: Sequence[ItemSource] = (),
) -> OrderView:
    """An order as ``OrderRead`` (and ``OrderSummary``) reads it, for a route to render or
    ``of`` to validate: its lines with their products' names, the total, and its items."""
    return OrderView(
        id=order.id,
        order_number=order.order_number,
        status=order.status,
        user_id=order.user_id,
        total=float(sum((line.unit_price * line.quantity for line in lines), Decimal(0))),
        items=[
            LineView(
                line.id,
                line.product_id,
                products[line.product_id].name,
                line.quantity,
                line.unit_price,
            )
            for line in lines
        ],
        created_at=order.created_at,
        updated_at=order.updated_at,
        product_items=[item_view(item) for item in items],
    )


class OrderFilter(PageParams):
    """A page of the project's orders, optionally only those in one ``status``, of one user
    (``user_id``) or with a line of one product (``product_id``); several filters add up."""

    status: OrderStatus | None = None
    user_id: uuid.UUID | None = None
    product_id: uuid.UUID | None = None


class OrderList(SnakeModel):
    orders: list[OrderSummary]
    pagination: Pagination
