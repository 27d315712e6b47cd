"""Seating plans, seats and holds: the use-cases (docs/api.md, "Seats")."""

import uuid
from collections import Counter
from itertools import groupby

from tessera.auth.principal import Principal
from tessera.db import Database, Transaction, rerun_on_conflict
from tessera.errors import InvalidInput, ProductInactive, ProductNotFound, ProductOutOfStock
from tessera.events.repository import get_event_row
from tessera.models import HoldStatus
from tessera.models.base import unix_now
from tessera.seats import repository
from tessera.seats.repository import SeatedProduct, SeatRow
from tessera.seats.rules import (
    SeatHoldEnded,
    SeatHoldNotFound,
    SeatingInUse,
    SeatNotFound,
    SeatsUnavailable,
    best_available,
    free_hold,
    hold_seats,
    names,
    placed,
    status,
)
from tessera.seats.schemas import (
    HoldCreate,
    HoldRead,
    PlanAreaRead,
    PlanRowRead,
    PlanSeatRead,
    SeatBlock,
    SeatFilter,
    SeatingPlan,
    SeatingRead,
    SeatList,
    SeatRead,
    SeatRef,
)

_PLACE_COLUMNS = ("category", "x", "y", "area_position", "row_position", "seat_position")


@rerun_on_conflict
async def put_plan(
    database: Database, principal: Principal, *, event_id: uuid.UUID, body: SeatingPlan
) -> SeatingRead:
    """Store the event's whole seating plan: a seat keeps its id by its name (area, row,
    number); seats left out are deleted, unless sold or held (409 naming them, nothing
    changes), as is a plan that gives a sold or held seat another category (its hold or item
    is its product's, which sells one category), or has fewer seats of a category than a
    seated product sells."""
    project_id = principal.project_id
    wanted = {(seat.area, seat.row, seat.number): seat for seat in placed(body)}
    async with database.transaction() as tx:
        await get_event_row(tx, project_id, event_id, lock=True)  # one plan change at a time
        stored = {
            (seat.area, seat.row, seat.number): seat
            for seat in await repository.lock_event_seats(tx, project_id, event_id)
        }
        now = unix_now()
        gone = [seat for key, seat in stored.items() if key not in wanted]
        if busy := [seat for seat in gone if status(seat, now) in ("sold", "held")]:
            raise SeatingInUse(
                f"the plan leaves out seats that are sold or held: {names(_in_order(busy))}"
            )
        moved = [
            seat
            for key, seat in stored.items()
            if key in wanted
            and wanted[key].category != seat.category
            and status(seat, now) in ("sold", "held")
        ]
        if moved:
            raise SeatingInUse(
                "the plan changes the category of seats that are sold or held: "
                f"{names(_in_order(moved))}"
            )
        counts = Counter(seat.category for seat in wanted.values())
        for product in await repository.seated_products(tx, project_id, event_id):
            sells = max(product.stock or 0, product.issued_count)
            if counts[product.seat_category] < sells:
                raise SeatingInUse(
                    f"product {product.name!r} ({product.id}) sells {sells} seats of category "
                    f"{product.seat_category!r}; the plan has "
                    f"{counts[product.seat_category]}: lower its stock first"
                )
        await repository.delete_seats(tx, [seat.id for seat in gone])
        changed = []
        for key, seat in wanted.items():
            before = stored.get(key)
            if before is not None and any(
                getattr(before, name) != getattr(seat, name) for name in _PLACE_COLUMNS
            ):
                changed.append({"id": before.id} | {n: getattr(seat, n) for n in _PLACE_COLUMNS})
        await repository.update_seats(tx, changed)
        await repository.insert_seats(
            tx,
            [
                seat._asdict() | {"project_id": project_id, "event_id": event_id}
                for key, seat in wanted.items()
                if key not in stored
            ],
        )
        plan = _plan(event_id, await repository.event_seats(tx, project_id, event_id))
        await tx.commit()
    return plan


async def get_plan(database: Database, principal: Principal, *, event_id: uuid.UUID) -> SeatingRead:
    """The event's seating plan (no areas when it has none)."""
    project_id = principal.project_id
    await database.read(get_event_row, project_id, event_id)
    return _plan(event_id, await database.read(repository.event_seats, project_id, event_id))


async def list_seats(
    database: Database, principal: Principal, *, event_id: uuid.UUID, query: SeatFilter
) -> SeatList:
    """The event's seats in the plan's order with their status now; those a product sells
    (``product_id``), those of one ``status``."""
    project_id = principal.project_id
    await database.read(get_event_row, project_id, event_id)
    if query.product_id is None:
        seats = await database.read(repository.event_seats, project_id, event_id)
    else:
        product = await _seated(database, principal, query.product_id, event_id=event_id)
        assert product.seat_category is not None  # _seated
        seats = await database.read(
            repository.category_seats, project_id, event_id, product.seat_category
        )
    now = unix_now()
    shown = [_seat_read(seat, now) for seat in seats]
    if query.status is not None:
        shown = [seat for seat in shown if seat.status == query.status]
    return SeatList(seats=shown)


@rerun_on_conflict
async def block_seat(
    database: Database,
    principal: Principal,
    *,
    event_id: uuid.UUID,
    seat_id: uuid.UUID,
    body: SeatBlock,
) -> SeatRead:
    """Keep a seat out of sale, or put it back; a sold or held seat stays as it is (409)."""
    async with database.transaction() as tx:
        found = await repository.seats_by_id(tx, principal.project_id, [seat_id], lock=True)
        seat = found[0] if found else None
        if seat is None or seat.event_id != event_id:
            raise SeatNotFound
        now = unix_now()
        if body.blocked != seat.blocked:
            if (current := status(seat, now)) in ("sold", "held"):
                raise SeatsUnavailable(
                    f"seat {names([seat])} is {current}: only an available or blocked seat "
                    "is blocked or unblocked"
                )
            await repository.block_seat(tx, seat.id, blocked=body.blocked)
            seat = seat._replace(blocked=body.blocked)
        await tx.commit()
    return _seat_read(seat, now)


@rerun_on_conflict
async def create_hold(database: Database, principal: Principal, *, body: HoldCreate) -> HoldRead:
    """Keep seats of a seated product for ``seconds``: the ones named (each available and of
    the product's category, else 409 naming them), or the best ``count`` available."""
    project_id = principal.project_id
    product = await _seated(database, principal, body.product_id)
    if not product.active:
        raise ProductInactive
    assert product.event_id is not None and product.seat_category is not None  # _seated
    wanted = len(body.named or ()) or body.best or 0
    if product.stock is not None and product.issued_count + wanted > product.stock:
        # Seats that could not be sold are not held (the sale checks the stock again).
        left = product.stock - product.issued_count
        raise ProductOutOfStock(f"product is out of stock: {left} left, {wanted} requested")
    async with database.transaction() as tx:
        now = unix_now()
        await _after_the_waiting_list(tx, project_id, product, wanted, now)
        if (named := body.named) is not None:
            seats = await _named_seats(tx, principal, product, named, now)
        else:
            assert body.best is not None  # HoldCreate: seats or count
            seats = await best_available(
                tx, project_id, product, body.best, together=body.together, now=now
            )
        until = now + body.seconds
        hold = await hold_seats(tx, project_id, product, seats, until=until)
        await tx.commit()
    return HoldRead(
        id=hold.id,
        product_id=product.id,
        seats=[_ref(seat) for seat in _in_order(seats)],
        expires_at=until,
    )


@rerun_on_conflict
async def release_hold(database: Database, principal: Principal, *, hold_id: uuid.UUID) -> None:
    """Free a hold's seats at once (an expired hold's too); a hold sold or given to a pending
    order stays (409: the order is cancelled instead)."""
    async with database.transaction() as tx:
        hold = await repository.get_hold(tx, principal.project_id, hold_id, lock=True)
        if hold is None:
            raise SeatHoldNotFound
        if hold.status == HoldStatus.SOLD:
            raise SeatHoldEnded(f"seat hold {hold_id} was sold: its seats are the items'")
        if hold.order_item_id is not None and hold.status == HoldStatus.HELD:
            raise SeatHoldEnded(
                f"seat hold {hold_id} is kept for a pending order: cancel the order to free it"
            )
        await free_hold(tx, principal.project_id, hold.id)
        await tx.commit()


async def _seated(
    database: Database,
    principal: Principal,
    product_id: uuid.UUID,
    *,
    event_id: uuid.UUID | None = None,
) -> SeatedProduct:
    """The project's product (404; of the event, where one is named), which sells seats
    (400 naming ``product_id`` otherwise)."""
    product = await database.read(repository.seated_product, principal.project_id, product_id)
    if product is None or (event_id is not None and product.event_id != event_id):
        raise ProductNotFound
    if product.seat_category is None or product.event_id is None:
        raise InvalidInput(f"product_id: product {product_id} sells no seats (no seat_category)")
    return product


async def _after_the_waiting_list(
    tx: Transaction, project_id: uuid.UUID, product: SeatedProduct, wanted: int, now: int
) -> None:
    """Seats that come free while people wait for the product are theirs (the worker offers
    them within seconds, ``waiting.tasks``): a hold may take only what is left beyond them
    (409)."""
    waiting = await repository.waiting_for(tx, product.id)
    if not waiting:
        return
    assert product.event_id is not None and product.seat_category is not None
    available = await repository.count_available(
        tx, project_id, product.event_id, product.seat_category, now=now
    )
    if available - waiting < wanted:
        raise SeatsUnavailable(
            f"the seats available ({available}) are kept for the product's waiting list, "
            f"which waits for {waiting}"
        )


async def _named_seats(
    tx: Transaction,
    principal: Principal,
    product: SeatedProduct,
    ids: list[uuid.UUID],
    now: int,
) -> list[SeatRow]:
    seats = await repository.seats_by_id(tx, principal.project_id, ids, lock=True)
    found = {seat.id for seat in seats if seat.event_id == product.event_id}
    if missing := [str(i) for i in ids if i not in found]:
        raise SeatNotFound(f"seats not found in the product's event: {', '.join(missing[:10])}")
    if other := [seat for seat in seats if seat.category != product.seat_category]:
        raise SeatsUnavailable(
            f"not seats of category {product.seat_category!r}, which product {product.id} "
            f"sells: {names(_in_order(other))}"
        )
    if taken := [seat for seat in seats if status(seat, now) != "available"]:
        listed = ", ".join(f"{names([seat])} ({status(seat, now)})" for seat in _in_order(taken))
        raise SeatsUnavailable(f"seats not available: {listed}")
    return seats


def _in_order(seats: list[SeatRow]) -> list[SeatRow]:
    return sorted(seats, key=lambda s: (s.area_position, s.row_position, s.seat_position))


def _ref(seat: SeatRow) -> SeatRef:
    return SeatRef(id=seat.id, area=seat.area, row=seat.row, number=seat.number)


def _seat_read(seat: SeatRow, now: int) -> SeatRead:
    return SeatRead(
        id=seat.id,
        area=seat.area,
        row=seat.row,
        number=seat.number,
        category=seat.category,
        x=seat.x,
        y=seat.y,
        status=status(seat, now),
    )


def _as_sent(value: float | None) -> int | float | None:
    """A coordinate as a plan sends it: a whole number as one (stored as a double)."""
    return int(value) if value is not None and value.is_integer() else value


def _plan(event_id: uuid.UUID, seats: list[SeatRow]) -> SeatingRead:
    """The plan of the seats (in the plan's order)."""
    areas = []
    for _, in_area in groupby(seats, key=lambda seat: seat.area_position):
        rows = list(in_area)
        area_rows = [
            PlanRowRead(
                name=row_seats[0].row,
                seats=[
                    PlanSeatRead(
                        id=seat.id,
                        number=seat.number,
                        category=seat.category,
                        x=_as_sent(seat.x),
                        y=_as_sent(seat.y),
                    )
                    for seat in row_seats
                ],
            )
            for _, grouped in groupby(rows, key=lambda seat: seat.row_position)
            if (row_seats := list(grouped))
        ]
        areas.append(PlanAreaRead(name=rows[0].area, rows=area_rows))
    return SeatingRead(event_id=event_id, seat_count=len(seats), areas=areas)
