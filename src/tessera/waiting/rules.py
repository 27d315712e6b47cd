"""The waiting list's rules: who is offered the stock that comes back, and what an offer's
claim, expiry or removal changes.

A product's line moves (``move_line``) under its row lock, the first lock of the documented
order (docs/design.md, "Locks"): lapsed offers end (``expired``), then the stock free for sale
goes to the first waiting entries it can serve, in line. An entry whose quantity does not fit
keeps its place and the entries behind it may be served; it is served first once enough comes
back. An offer is a claim link bound to the entry's email for its quantity, open for the
product's ``waiting_list_offer_seconds``, emailed, and announced by a ``waiting_list.offered``
change. Its stock is kept: counted on the product (``waiting_list_kept``), which issuing leaves
alone, or, for a seated product, the best seats side by side held for the offer until it ends.
"""

import uuid
from datetime import datetime
from typing import NamedTuple

from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Transaction
from tessera.errors import Conflict, NotFound
from tessera.mail import service as outbox
from tessera.models import EntryStatus
from tessera.models.base import new_id
from tessera.models.claim import new_link_token
from tessera.seats import repository as seat_rows
from tessera.seats.repository import SeatedProduct
from tessera.seats.rules import SeatsUnavailable, best_available, free_hold, hold_seats
from tessera.toolkit.crypto import keyed_hash
from tessera.waiting import repository
from tessera.waiting.repository import EntryRow, WaitedProduct
from tessera.waiting.schemas import OFFER_SECONDS, EntryChange

# Stock beyond any entry's need: what a product without a stock has free.
_PLENTY = 1_000_000


class Line(NamedTuple):
    """A line as moved: its product (None: no such product) and what is free for sale."""

    product: WaitedProduct | None
    free: int


class EntryNotFound(NotFound):
    message = "waiting list entry not found"


class AlreadyWaiting(Conflict):
    message = "this email is already on the product's waiting list"


class NotSoldOut(Conflict):
    message = "the product is not sold out: buy it instead"


class EntryEnded(Conflict):
    message = "the waiting list entry has ended"


async def move_line(
    tx: Transaction,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    *,
    hash_key: bytes,
    now: datetime,
) -> Line:
    """Move the product's line (see the module): lapsed offers end, free stock is offered.
    Locks the product's row. The product as locked (None: no such product) and what is still
    free for sale afterwards (0 for an inactive one: its line waits until it is switched on)."""
    product = await repository.product(tx, project_id, product_id, lock=True)
    if product is None:
        return Line(None, 0)
    unix = int(now.timestamp())
    kept = 0
    for entry in await repository.lapsed(tx, project_id, product_id, unix):
        await _end(tx, entry, EntryStatus.EXPIRED, now)
        kept -= entry.quantity if product.seat_category is None else 0
    if not product.active:  # nothing is for sale: the line waits until it is switched on
        await repository.keep(tx, product.id, kept)
        return Line(product, 0)
    free = await _free(tx, product, kept, unix)
    served = True
    while free > 0 and served:  # again while some were served: smaller ones behind may fit
        served = False
        for entry in await repository.servable(tx, project_id, product_id, free):
            if entry.quantity > free:
                continue
            if await _offer(tx, product, entry, hash_key=hash_key, now=now):
                served = True
                free -= entry.quantity
                kept += entry.quantity if product.seat_category is None else 0
    await repository.keep(tx, product.id, kept)
    return Line(product, free)


async def _free(tx: Transaction, product: WaitedProduct, kept: int, now: int) -> int:
    """What of the product is free for sale: its stock less the items issued and the stock
    kept for offers (``kept``: the change not written yet); for a seated product, its seats
    available (seats held for offers are not), at most its stock less the items issued."""
    left = _PLENTY if product.stock is None else product.stock - product.issued_count
    if product.seat_category is None:
        return max(0, left - product.waiting_list_kept - kept)
    assert product.event_id is not None  # a seated product is its event's
    available = await seat_rows.count_available(
        tx, product.project_id, product.event_id, product.seat_category, now=now
    )
    return max(0, min(left, available))


async def _offer(
    tx: Transaction, product: WaitedProduct, entry: EntryRow, *, hash_key: bytes, now: datetime
) -> bool:
    """Offer the entry its quantity (a seated product: the best seats side by side, held until
    the offer ends; False when no such seats are free, and nothing changes)."""
    unix = int(now.timestamp())
    until = unix + (product.waiting_list_offer_seconds or OFFER_SECONDS)
    hold_id = None
    if product.seat_category is not None:
        seated = SeatedProduct(*(getattr(product, name) for name in SeatedProduct._fields))
        try:
            seats = await best_available(
                tx, product.project_id, seated, entry.quantity, together=True, now=unix
            )
        except SeatsUnavailable:
            return False
        hold_id = (await hold_seats(tx, product.project_id, seated, seats, until=until)).id
    token, hint = new_link_token()
    link_id = new_id()
    await repository.add_link(
        tx,
        {
            "id": link_id,
            "project_id": product.project_id,
            "product_id": product.id,
            "token_hash": keyed_hash(hash_key, token),
            "token_hint": hint,
            "max_claims": 1,
            "claims": 0,
            "quantity": entry.quantity,
            "hold_id": hold_id,
            "expires_at": until,
            "email": entry.email,
            "created_at": now,
            "updated_at": now,
        },
    )
    entry = await repository.set_entry(
        tx,
        entry,
        now,
        status=EntryStatus.OFFERED,
        link_id=link_id,
        offered_at=unix,
        offer_expires_at=until,
    )
    await outbox.queue_offer(
        tx,
        product.project_id,
        link_id=link_id,
        email=entry.email,
        first_name=entry.first_name,
        product=product.name,
        event_id=product.event_id,
        quantity=entry.quantity,
        claim_url=f"{entry.base_url}/claim/{token}",
        expires_at=until,
    )
    await _announce(tx, entry, EventType.WAITING_LIST_OFFERED)
    return True


async def _end(
    tx: Transaction,
    entry: EntryRow,
    status: EntryStatus,
    now: datetime,
    *,
    user_id: uuid.UUID | None = None,
) -> EntryRow:
    ended = await repository.set_entry(tx, entry, now, status=status)
    kind = {
        EntryStatus.EXPIRED: EventType.WAITING_LIST_EXPIRED,
        EntryStatus.CLAIMED: EventType.WAITING_LIST_CLAIMED,
    }.get(status)
    if kind is not None:
        await _announce(tx, ended, kind, user_id=user_id)
    return ended


async def _announce(
    tx: Transaction, entry: EntryRow, kind: EventType, *, user_id: uuid.UUID | None = None
) -> None:
    change = EntryChange(
        id=entry.id,
        product_id=entry.product_id,
        email=entry.email,
        quantity=entry.quantity,
        status=entry.status,
        claim_link_id=entry.link_id,
        offer_expires_at=entry.offer_expires_at,
        user_id=user_id,
    )
    await record(tx, entry.project_id, kind, [change])


async def offer_of(rows: Transaction, link_id: uuid.UUID) -> EntryRow | None:
    """The entry a claim link offers stock to, as read before the claim issues (None for a
    link of no offer): the issue counts the stock kept for it as the claim's own
    (``products.rules.issue``'s ``offered``), then ``claimed`` ends it."""
    return await repository.entry_of_link(rows, link_id, lock=False)


async def claimed(
    tx: Transaction, entry: EntryRow, seated: bool, user_id: uuid.UUID, now: datetime
) -> None:
    """The entry's offer was claimed by ``user_id``, its items issued in ``tx`` (which holds
    its product's row lock): the stock kept for it is theirs now, and the entry is out of line.
    409 if the offer ended meanwhile (the worker's round expired it): the caller rolls back."""
    locked = await repository.entry_of_link(tx, entry.link_id, lock=True) if entry.link_id else None
    if locked is None or locked.status != EntryStatus.OFFERED:
        status = entry.status if locked is None else locked.status
        raise EntryEnded(f"this offer has ended: the waiting list entry is {status}")
    if not seated:
        await repository.keep(tx, locked.product_id, -locked.quantity)
    await _end(tx, locked, EntryStatus.CLAIMED, now, user_id=user_id)


async def remove(tx: Transaction, entry: EntryRow, now: datetime) -> EntryRow:
    """Take the entry (locked, with its product's row) off the list; an open offer is
    withdrawn: its link revoked, its stock or seats free again (the caller moves the line).
    409 for an entry claimed or expired; an entry removed already stays as it is."""
    if entry.status in (EntryStatus.CLAIMED, EntryStatus.EXPIRED):
        raise EntryEnded(f"the waiting list entry is {entry.status}: it is out of line already")
    if entry.status == EntryStatus.REMOVED:
        return entry
    if entry.status == EntryStatus.OFFERED and entry.link_id is not None:
        link = await repository.revoke_link(tx, entry.link_id, now)
        if link.hold_id is not None:
            await free_hold(tx, entry.project_id, link.hold_id)
        else:
            await repository.keep(tx, entry.product_id, -entry.quantity)
    return await repository.set_entry(tx, entry, now, status=EntryStatus.REMOVED)
