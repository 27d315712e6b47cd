"""The rules of seats, on rows already read: a plan's seats and their order, what a new plan
changes, a seat's status, and the best seats available.

A seat is *sold* while an item holds it, *blocked* while the operator keeps it out of sale,
*held* while a hold keeps it (until ``held_until``; with no end while a pending order does), and
*available* otherwise. A hold that has expired frees its seats at that second: nothing has to
run first, since every statement that reads a seat's status compares ``held_until`` with now.

A row's seats are in the order of their numbers (``natural``: "2" before "10"), and seats are
side by side when they are next to each other in that order; the plan's areas and rows are in
the order sent, the front row of each area first.
"""

import hashlib
import re
import uuid
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from tessera.db import Rows, Transaction, serialize
from tessera.errors import Conflict, InvalidInput, NotFound
from tessera.models import HoldStatus
from tessera.models.base import unix_now
from tessera.seats import repository
from tessera.seats.repository import HoldRow, SeatedProduct, SeatRow
from tessera.seats.schemas import SeatingPlan, SeatStatus


class SeatNotFound(NotFound):
    message = "seat not found"


class SeatHoldNotFound(NotFound):
    message = "seat hold not found"


class SeatsUnavailable(Conflict):
    message = "the seats are not available"


class SeatHoldEnded(Conflict):
    message = "the seat hold has ended"


class SeatingInUse(Conflict):
    message = "the seating plan would leave out seats that are sold or held"


# Best seats chosen again when a hold by id took one of them meanwhile, at most this often.
_CHOICES = 5
_PAGE = 500  # available seats read at a time, looking for the best ones
_PARTS = re.compile(r"(\d+)")


def natural(number: str) -> tuple[tuple[int, int | str], ...]:
    """The order of seat numbers: digits as numbers, the rest as text ("A2" before "A10")."""
    return tuple(
        (0, int(part)) if part.isdecimal() else (1, part) for part in _PARTS.split(number) if part
    )


class PlacedSeat(NamedTuple):
    """A seat of a plan as sent, with its place in the plan's order."""

    area: str
    row: str
    number: str
    category: str | None
    x: float | None
    y: float | None
    area_position: int
    row_position: int
    seat_position: int


def placed(plan: SeatingPlan) -> list[PlacedSeat]:
    """Every seat of ``plan``, in the plan's order."""
    seats = []
    for a, area in enumerate(plan.areas):
        for r, row in enumerate(area.rows):
            ordered = sorted(row.seats, key=lambda seat: natural(seat.number))
            for s, seat in enumerate(ordered):
                seats.append(
                    PlacedSeat(
                        area.name, row.name, seat.number, seat.category, seat.x, seat.y, a, r, s
                    )
                )
    return seats


class StatusOf(Protocol):
    @property
    def blocked(self) -> bool: ...
    @property
    def hold_id(self) -> uuid.UUID | None: ...
    @property
    def held_until(self) -> int | None: ...
    @property
    def item_id(self) -> uuid.UUID | None: ...


def status(seat: StatusOf, now: int) -> SeatStatus:
    if seat.item_id is not None:
        return "sold"
    if seat.blocked:
        return "blocked"
    if held(seat, now):
        return "held"
    return "available"


def held(seat: StatusOf, now: int) -> bool:
    """Whether a hold keeps the seat at ``now`` (an order's hold has no end)."""
    return seat.hold_id is not None and (seat.held_until is None or seat.held_until > now)


class Placed(Protocol):
    @property
    def id(self) -> uuid.UUID: ...
    @property
    def area_position(self) -> int: ...
    @property
    def row_position(self) -> int: ...
    @property
    def seat_position(self) -> int: ...


def best(seats: Iterable[Placed], count: int, *, together: bool) -> list[uuid.UUID] | None:
    """The best ``count`` of ``seats`` (the available ones of a category, in the plan's order,
    each with its position among all the seats of its row): the first ``count`` side by side
    in one row, the front rows first; or, not ``together``, the first ``count``. None if there
    are not so many."""
    ordered = list(seats)
    if not together:
        return [seat.id for seat in ordered[:count]] if len(ordered) >= count else None
    run: list[Placed] = []
    for seat in ordered:
        if run and not _next_to(run[-1], seat):
            run = []
        run.append(seat)
        if len(run) == count:
            return [seat.id for seat in run]
    return None


def _next_to(left: Placed, right: Placed) -> bool:
    return (
        left.area_position == right.area_position
        and left.row_position == right.row_position
        and right.seat_position == left.seat_position + 1
    )


class Named(Protocol):
    @property
    def area(self) -> str: ...
    @property
    def row(self) -> str: ...
    @property
    def number(self) -> str: ...


def name(seat: Named) -> str:
    """A seat as a person reads it: ``Stalls A-12``."""
    return f"{seat.area} {seat.row}-{seat.number}"


class OnTicket(Protocol):
    """An item's row, or a ticket's, with the seat it names."""

    @property
    def seat_area(self) -> str | None: ...
    @property
    def seat_row(self) -> str | None: ...
    @property
    def seat_number(self) -> str | None: ...


class Seated(OnTicket, Protocol):
    """An item's row, or a ticket's, with its seat's id too."""

    @property
    def seat_id(self) -> uuid.UUID | None: ...


class SeatView(NamedTuple):
    """An item's seat as ``SeatRef`` reads it (a row's columns: the renderer reads it as is)."""

    id: uuid.UUID
    area: str
    row: str
    number: str


def seat_of(item: Seated) -> SeatView | None:
    """The seat a seated product's item names; None for no seat."""
    if item.seat_id is None:
        return None
    assert item.seat_area is not None and item.seat_row is not None
    assert item.seat_number is not None
    return SeatView(item.seat_id, item.seat_area, item.seat_row, item.seat_number)


def seat_label(item: OnTicket) -> str | None:
    """An item's seat as its ticket says it (``Stalls, row A, seat 12``); None for no seat."""
    if item.seat_number is None:
        return None
    return f"{item.seat_area}, row {item.seat_row}, seat {item.seat_number}"


def names(seats: Sequence[Named], most: int = 10) -> str:
    """The seats' names, the first ``most`` of them and how many more."""
    shown = ", ".join(name(seat) for seat in seats[:most])
    more = len(seats) - most
    return f"{shown} and {more} more" if more > 0 else shown


def best_seats_lock(product_id: uuid.UUID) -> int:
    """The advisory lock under which the best seats of a product are chosen (``db.serialize``):
    two buyers asking for the best seats at once would choose the same ones, and one would have
    to choose again. Holds of seats named by id do not take it (their row locks suffice)."""
    digest = hashlib.blake2b(b"best seats\0" + product_id.bytes, digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def require_hold(
    product_id: uuid.UUID, seat_category: str | None, hold_id: uuid.UUID | None
) -> None:
    """A seated product is sold through a hold of its seats, and only it (400 naming
    ``hold_id``)."""
    if seat_category is not None and hold_id is None:
        raise InvalidInput(
            f"hold_id: product {product_id} sells seats (seat_category {seat_category!r}): "
            "hold them first (POST /v1/seat-holds) and send the hold's id"
        )
    if seat_category is None and hold_id is not None:
        raise InvalidInput(f"hold_id: product {product_id} sells no seats (no seat_category)")


async def seated_stock(
    rows: Rows,
    project_id: uuid.UUID,
    event_id: uuid.UUID | None,
    category: str,
    stock: int | None,
) -> int:
    """The stock of a product that sells the seats of ``category``: ``stock``, at most their
    number (409), or their number when None; the product needs its event (400)."""
    if event_id is None:
        raise InvalidInput("event_id: a seated product (seat_category) is for an event")
    seats = await repository.count_category(rows, project_id, event_id, category)
    if seats == 0:
        raise SeatsUnavailable(f"the event's seating plan has no seats of category {category!r}")
    if stock is not None and stock > seats:
        raise SeatsUnavailable(
            f"stock cannot be {stock}: the event has {seats} seats of category {category!r}"
        )
    return seats if stock is None else stock


async def require_no_seats_taken(
    rows: Rows, product_id: uuid.UUID, issued: int, changed: Sequence[str]
) -> None:
    """A seated product's seats (``changed``: its category or event) stay while any is sold
    or held for it (409)."""
    if not changed:
        return
    fields = ", ".join(sorted(changed))
    if issued:
        raise SeatsUnavailable(f"{fields} cannot change: items were already issued ({issued})")
    if held := await repository.live_holds(rows, product_id, now=unix_now()):
        raise SeatsUnavailable(
            f"{fields} cannot change while seats are held for the product ({held} holds)"
        )


async def live_hold(
    tx: Transaction,
    project_id: uuid.UUID,
    hold_id: uuid.UUID,
    product_id: uuid.UUID,
    *,
    line_id: uuid.UUID | None = None,
) -> tuple[HoldRow, list[SeatRow]]:
    """The hold (locked, with its seats, locked in id order) for a sale of ``product_id``: 404
    unknown, 409 for another product's, a hold sold, released, expired, or given to an order
    line other than ``line_id``."""
    hold = await repository.get_hold(tx, project_id, hold_id, lock=True)
    if hold is None:
        raise SeatHoldNotFound
    if hold.product_id != product_id:
        raise SeatHoldEnded(f"seat hold {hold_id} is for product {hold.product_id}")
    if hold.status != HoldStatus.HELD:
        raise SeatHoldEnded(f"seat hold {hold_id} has ended: {hold.status}")
    if hold.order_item_id is not None and hold.order_item_id != line_id:
        raise SeatHoldEnded(f"seat hold {hold_id} is kept for a pending order")
    if hold.order_item_id is None and hold.expires_at <= unix_now():
        raise SeatHoldEnded(f"seat hold {hold_id} expired; its seats are free again")
    return hold, await repository.lock_held(tx, hold.id)


def _fits(hold: HoldRow, seats: Sequence[SeatRow], quantity: int) -> list[SeatRow]:
    if quantity != len(seats):
        raise InvalidInput(
            f"hold_id: seat hold {hold.id} keeps {len(seats)} seats; {quantity} are asked for"
        )
    return sorted(
        seats, key=lambda seat: (seat.area_position, seat.row_position, seat.seat_position)
    )


async def sell(
    tx: Transaction,
    project_id: uuid.UUID,
    hold_id: uuid.UUID,
    product_id: uuid.UUID,
    item_ids: Sequence[uuid.UUID],
    *,
    line_id: uuid.UUID | None = None,
) -> list[SeatRow]:
    """The hold's seats sold to the items, one each in the plan's order; the hold ends. The
    seats, as they were named."""
    hold, seats = await live_hold(tx, project_id, hold_id, product_id, line_id=line_id)
    ordered = _fits(hold, seats, len(item_ids))
    await repository.sell_seats(tx, list(zip(ordered, item_ids, strict=True)))
    await repository.set_hold(tx, hold, status=HoldStatus.SOLD)
    return ordered


async def keep_for_line(
    tx: Transaction,
    project_id: uuid.UUID,
    hold_id: uuid.UUID,
    product_id: uuid.UUID,
    *,
    line_id: uuid.UUID,
    quantity: int,
) -> None:
    """The hold given to a pending order's line: its seats are kept until the order is
    completed (``sell``) or cancelled (``free_lines``)."""
    hold, seats = await live_hold(tx, project_id, hold_id, product_id)
    _fits(hold, seats, quantity)
    await repository.keep_seats(tx, hold.id)
    await repository.set_hold(tx, hold, status=HoldStatus.HELD, order_item_id=line_id)


async def hold_of_lines(
    tx: Transaction, line_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, uuid.UUID]:
    """The holds given to pending order lines: line id -> hold id."""
    holds = await repository.holds_of_lines(tx, line_ids)
    return {hold.order_item_id: hold.id for hold in holds if hold.order_item_id is not None}


async def free_lines(tx: Transaction, line_ids: Sequence[uuid.UUID]) -> None:
    """The seats kept for cancelled order lines are free again; their holds end."""
    for found in await repository.holds_of_lines(tx, line_ids):
        await free_hold(tx, found.project_id, found.id)


async def free_hold(tx: Transaction, project_id: uuid.UUID, hold_id: uuid.UUID) -> None:
    """The hold's seats free again, the hold released (a hold that has ended stays)."""
    hold = await repository.get_hold(tx, project_id, hold_id, lock=True)
    assert hold is not None  # holds stay, only their status changes
    if hold.status == HoldStatus.HELD:
        await repository.lock_held(tx, hold.id)
        await repository.free_seats(tx, hold.id)
        await repository.set_hold(tx, hold, status=HoldStatus.RELEASED)


async def best_available(
    tx: Transaction,
    project_id: uuid.UUID,
    product: SeatedProduct,
    count: int,
    *,
    together: bool,
    now: int,
) -> list[SeatRow]:
    """The best ``count`` available seats of a seated product, locked (chosen under
    ``best_seats_lock``, and again if a hold by id took one meanwhile); 409 if there are not so
    many (side by side, ``together``)."""
    assert product.event_id is not None and product.seat_category is not None
    await serialize(tx, best_seats_lock(product.id))
    for _ in range(_CHOICES):
        chosen = await _choose(tx, project_id, product, count, together, now)
        if chosen is None:
            available = await repository.count_available(
                tx, project_id, product.event_id, product.seat_category, now=now
            )
            where = "side by side in one row " if together else ""
            raise SeatsUnavailable(
                f"no {count} seats of category {product.seat_category!r} are available "
                f"{where}({available} available in all)"
            )
        seats = await repository.seats_by_id(tx, project_id, chosen, lock=True)
        if all(status(seat, now) == "available" for seat in seats):
            return seats
    raise SeatsUnavailable("the seats are being taken as they are chosen: try again")


async def _choose(
    tx: Transaction,
    project_id: uuid.UUID,
    product: SeatedProduct,
    count: int,
    together: bool,
    now: int,
) -> list[uuid.UUID] | None:
    """The best seats (``best``) of the available ones, read from the front a page at a
    time: a run of seats may go on from one page to the next, so the last ``count - 1`` seats
    of a page are looked at again with the next."""
    assert product.event_id is not None and product.seat_category is not None
    after, carried = (-1, -1, -1), list[SeatRow]()
    while True:
        page = await repository.available_seats(
            tx,
            project_id,
            product.event_id,
            product.seat_category,
            now=now,
            after=after,
            limit=_PAGE,
        )
        looked_at = carried + page
        if (chosen := best(looked_at, count, together=together)) is not None:
            return chosen
        if len(page) < _PAGE:
            return None
        last = page[-1]
        after = (last.area_position, last.row_position, last.seat_position)
        carried = looked_at[max(0, len(looked_at) - count + 1) :] if together else looked_at


async def hold_seats(
    tx: Transaction,
    project_id: uuid.UUID,
    product: SeatedProduct,
    seats: Sequence[SeatRow],
    *,
    until: int,
) -> HoldRow:
    """A new hold of ``seats`` (locked, available) for the product, until ``until``."""
    assert product.event_id is not None
    hold = await repository.insert_hold(
        tx,
        {
            "project_id": project_id,
            "product_id": product.id,
            "event_id": product.event_id,
            "status": HoldStatus.HELD,
            "expires_at": until,
        },
    )
    await repository.take_seats(tx, [seat.id for seat in seats], hold.id, until)
    return hold
