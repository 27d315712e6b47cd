"""Orders: the source of sales. Completing an order issues its items under the issuing rules."""

import secrets
import uuid
from decimal import Decimal

from sqlalchemy.exc import IntegrityError

from tessera.auth.principal import Principal
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Database, Rows, Transaction, rerun_on_conflict, with_defaults
from tessera.errors import (
    OrderNotFound,
    OrderNotPending,
    OrderNumberTaken,
    ProductInactive,
    ProductNotFound,
)
from tessera.mail import service as outbox
from tessera.mail.letters import Kind
from tessera.mail.service import TicketMail, tickets_of
from tessera.models import OrderItem, OrderStatus
from tessera.models.base import new_id, utcnow
from tessera.orders import repository
from tessera.orders.repository import LineRow, OrderRow
from tessera.orders.schemas import OrderCreate, OrderFilter, OrderList, OrderRead, OrderView
from tessera.products import repository as products
from tessera.products import rules
from tessera.products.rows import Item
from tessera.seats import rules as seats
from tessera.users.repository import UserRow, get_user_row
from tessera.users.schemas import UserRef


@rerun_on_conflict
async def create_order(
    database: Database,
    principal: Principal,
    *,
    body: OrderCreate,
    mail: TicketMail | None = None,
) -> OrderRead:
    """Record an order at today's prices; a completed order issues its items (all or nothing)
    and, with ``mail``, emails the buyer a link to each (``_mail_items``)."""
    async with database.transaction() as tx:
        user = await get_user_row(tx, principal.project_id, body.user.ref())
        wanted = {line.product_id for line in body.items}
        by_id = await products.products_by_id(tx, principal.project_id, wanted)
        if missing := wanted - by_id.keys():
            listed = ", ".join(sorted(str(m) for m in missing))
            raise ProductNotFound(f"product not found: {listed}")
        for product in by_id.values():
            if not product.active:
                raise ProductInactive(f"product is not active: {product.id}")

        now = utcnow()
        order_number = body.order_number or f"TS-{secrets.token_hex(5).upper()}"
        try:
            order = await repository.add_order(
                tx,
                {
                    "project_id": principal.project_id,
                    "order_number": order_number,
                    "user_id": user.id,
                    # A completed order is written completed: no second write of its row.
                    "status": OrderStatus(body.status),
                    "created_at": now,
                    "updated_at": now,
                },
            )
        except IntegrityError as exc:
            raise OrderNumberTaken(f"order_number already used: {order_number}") from exc
        lines = [
            with_defaults(
                OrderItem,
                {
                    "id": new_id(),
                    "order_id": order.id,
                    "product_id": line.product_id,
                    "position": position,
                    "quantity": line.quantity,
                    "unit_price": Decimal(by_id[line.product_id].price),
                    "created_at": now,
                },
            )
            for position, line in enumerate(body.items)
        ]
        holds = {line["id"]: asked.hold_id for line, asked in zip(lines, body.items, strict=True)}
        for line in lines:
            product = by_id[line["product_id"]]
            seats.require_hold(product.id, product.seat_category, holds[line["id"]])
        items: list[Item] = []
        if body.status == "completed":
            # Each line is written with its items, under its product's row lock (see
            # rules.issue): a line's foreign key then takes its key-share lock under this
            # transaction's own lock. Taken while other orders held the row, it collected
            # multixacts, and completed orders of one product ran at half the rate.
            for line in sorted(lines, key=lambda x: _lock_order(x["product_id"], x["position"])):
                items += await rules.issue(
                    tx,
                    principal,
                    line["product_id"],
                    [user] * line["quantity"],
                    new_line=line,
                    hold_id=holds[line["id"]],
                )
        else:
            await repository.add_lines(tx, lines)
            for line in lines:  # the seats are kept for the order until it ends
                if (hold_id := holds[line["id"]]) is not None:
                    await seats.keep_for_line(
                        tx,
                        principal.project_id,
                        hold_id,
                        line["product_id"],
                        line_id=line["id"],
                        quantity=line["quantity"],
                    )
        read = OrderRead.of(order, [LineRow(**line) for line in lines], by_id, items)
        await record(tx, principal.project_id, EventType.ORDER_CREATED, [read])
        if order.status == OrderStatus.COMPLETED:
            await record(tx, principal.project_id, EventType.ORDER_COMPLETED, [read])
            await _mail_items(tx, principal, mail, order.id, items)
        await tx.commit()
    return read


@rerun_on_conflict
async def complete_order(
    database: Database,
    principal: Principal,
    *,
    order_id: uuid.UUID,
    mail: TicketMail | None = None,
) -> OrderRead:
    """Complete a pending order: its items are issued now, or nothing changes (409). With
    ``mail``, the buyer is emailed a link to each (``_mail_items``)."""
    async with database.transaction() as tx:
        order, lines = await repository.lock_order(tx, principal.project_id, order_id)
        _require_pending(order, "completed")
        user = await get_user_row(tx, principal.project_id, UserRef("id", order.user_id))
        # Before any product is locked.
        order = await repository.set_status(tx, order, OrderStatus.COMPLETED)
        items = await _issue_lines(tx, principal, lines, user)
        read = await _view(tx, principal, order, lines, items)
        await record(tx, principal.project_id, EventType.ORDER_COMPLETED, [read])
        await _mail_items(tx, principal, mail, order.id, items)
        await tx.commit()
    return read


@rerun_on_conflict
async def cancel_order(
    database: Database, principal: Principal, *, order_id: uuid.UUID
) -> OrderRead:
    """Cancel a pending order: the seats kept for it are free again. Completed orders stay
    completed (their items are issued)."""
    async with database.transaction() as tx:
        order, lines = await repository.lock_order(tx, principal.project_id, order_id)
        _require_pending(order, "cancelled")
        order = await repository.set_status(tx, order, OrderStatus.CANCELLED)
        await seats.free_lines(tx, [line.id for line in lines])
        read = await _view(tx, principal, order, lines, [])
        await record(tx, principal.project_id, EventType.ORDER_CANCELLED, [read])
        await tx.commit()
    return read


async def get_order(database: Database, principal: Principal, *, order_id: uuid.UUID) -> OrderView:
    """The order as ``OrderRead`` reads it."""
    order = await database.read(repository.read_order, principal.project_id, order_id)
    if order is None:
        raise OrderNotFound
    return order


async def list_orders(database: Database, principal: Principal, *, query: OrderFilter) -> OrderList:
    """The project's orders, oldest first, each with its lines; the filters add up."""
    return await database.read(repository.read_orders, principal.project_id, query)


async def _mail_items(
    tx: Transaction,
    principal: Principal,
    mail: TicketMail | None,
    order_id: uuid.UUID,
    items: list[Item],
) -> None:
    """One email for the completed order's items, all its lines together (once per order)."""
    if mail is not None and items:
        await outbox.queue_tickets(
            tx,
            principal.project_id,
            await tickets_of(tx, mail, principal.project_id, items),
            kind=Kind.ORDERED,
            cause=f"order:{order_id}",
        )


def _require_pending(order: OrderRow, action: str) -> None:
    if order.status != OrderStatus.PENDING:
        raise OrderNotPending(f"only a pending order can be {action}; this one is {order.status}")


def _lock_order(product_id: uuid.UUID, position: int) -> tuple[str, int]:
    """Lines are issued (their products locked) in one order of their products, by id, so
    that two orders never wait on each other."""
    return str(product_id), position


async def _issue_lines(
    tx: Transaction, principal: Principal, lines: list[LineRow], user: UserRow
) -> list[Item]:
    """The items of a completed order's lines, issued by the issuing rules."""
    holds = await seats.hold_of_lines(tx, [line.id for line in lines])
    items: list[Item] = []
    for line in sorted(lines, key=lambda line: _lock_order(line.product_id, line.position)):
        items += await rules.issue(
            tx,
            principal,
            line.product_id,
            [user] * line.quantity,
            order_item_id=line.id,
            hold_id=holds.get(line.id),
        )
    return items


async def _view(
    rows: Rows, principal: Principal, order: OrderRow, lines: list[LineRow], items: list[Item]
) -> OrderRead:
    ids = {line.product_id for line in lines}
    by_id = await products.products_by_id(rows, principal.project_id, ids)
    return OrderRead.of(order, lines, by_id, items)
