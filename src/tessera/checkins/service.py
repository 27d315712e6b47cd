"""Scanning at the door: one use-case for the API (``POST /v1/checkins``) and the console's door,
the scans made offline (``upload``), the undo window (``annul``), what a door needs offline
(``sync``), and the scans listed.

A scan names a ticket by its secret (or, at the console's door, the item a person's email or
reference id found). In one transaction it redeems one use of the item and checks its holder in
at the product's event (a product without an event: the redemption alone), and records the
scan with the answer it got, refused ones too. Any text that is not a ticket of the project is
``unknown``; a signed secret whose signature does not hold ``invalid``; an older version's
``revoked`` (``tickets.service.ticket_of_secret``). The same ``nonce`` again gets the recorded
answer again and counts once. Scans made offline (``upload``) arrive later, in batches of up to
500, each with the time it was made and its device. How each scan is decided, the locks it
takes, and why the earliest scan wins whatever order doors upload in: ``checkins.rules``.

Within ``TESSERA_CHECKIN_ANNUL_SECONDS`` an ``ok`` scan can be annulled: the use is given back
(its redemption deleted, the item's count and last redemption time as they were) and, when it
was the holder's earliest scan, their check-in time becomes the earliest of their other scans
there (or what it was before it). A first check-in's reputation point is taken back when the
holder is no longer checked in and the balance still has it. A scan it had displaced, or that
conflicted with it, stays as it is: the operator sees it among the conflicts.
"""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from tessera.auth.principal import Principal
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.checkins import repository
from tessera.checkins.repository import ListedScan, ScanRow, SyncedTicketRow
from tessera.checkins.rules import Door, Found, Scan, Scanned, Source
from tessera.checkins.schemas import (
    AnnulRead,
    BatchRead,
    BatchRequest,
    BatchResult,
    DoorEvent,
    DoorEvents,
    ScanList,
    ScanRead,
    SyncedTicket,
    SyncRead,
)
from tessera.db import Database, Rows, rerun_on_conflict
from tessera.errors import AnnulWindowClosed, CheckinNotFound, ProductItemNotFound
from tessera.events import repository as events
from tessera.events.service import FIRST_CHECK_IN_REPUTATION
from tessera.models.base import utcnow
from tessera.products import item_repository
from tessera.products import repository as products
from tessera.schemas import PageParams, Pagination
from tessera.seats.rules import seat_of
from tessera.ticket_keys import service as ticket_keys
from tessera.ticket_keys.service import ProjectKeys
from tessera.tickets.repository import TicketItem
from tessera.tickets.service import (
    Unreadable,
    named_items,
    tickets_of_named,
    tickets_of_secrets,
)
from tessera.users.repository import get_user_row
from tessera.users.reputation_repository import add_reputation
from tessera.users.schemas import UserRef

__all__ = ["Scanned", "Source", "annul", "scan", "scan_item", "sync", "upload"]


@rerun_on_conflict
async def scan(
    database: Database,
    principal: Principal,
    *,
    hash_key: bytes,
    secret: str,
    nonce: str,
    event_id: uuid.UUID | None = None,
    source: Source = "api",
) -> Scanned:
    """Check in the ticket whose secret this is (see the module docstring)."""
    async with database.transaction() as tx:
        keys = await ticket_keys.project_keys(tx, principal.project_id)
        [item] = await tickets_of_secrets(
            tx, principal.project_id, [secret], keys=keys, hash_key=hash_key
        )
        found = _found(item)
        door = await Door.open(tx, principal, found=_items(found), nonces=[nonce], now=utcnow())
        door.decide(Scan(nonce, event_id, source), found)
        await door.write()
        await tx.commit()
    return door.answered[nonce]


@rerun_on_conflict
async def scan_item(
    database: Database,
    principal: Principal,
    *,
    product_id: uuid.UUID,
    item_id: uuid.UUID,
    nonce: str,
    event_id: uuid.UUID | None = None,
    source: Source = "console",
) -> Scanned:
    """Check in an item found another way (the console's door: a person's email or reference
    id), by the same rules as a scanned secret (404 for no such item of the product)."""
    async with database.transaction() as tx:
        found = Found(product_id, item_id)
        door = await Door.open(tx, principal, found=[found], nonces=[nonce], now=utcnow())
        if item_id not in door.tickets:
            raise ProductItemNotFound
        door.decide(Scan(nonce, event_id, source), found)
        await door.write()
        await tx.commit()
    return door.answered[nonce]


@rerun_on_conflict
async def annul(
    database: Database, principal: Principal, *, nonce: str, window: timedelta
) -> AnnulRead:
    """Revert the ``ok`` scan of ``nonce`` within ``window`` of it (see the module docstring);
    again for one annulled already, the same answer. No ``ok`` scan of that nonce: 404; one
    older than the window: 409."""
    async with database.transaction() as tx:
        found = await repository.scan_of_nonce(tx, principal.project_id, nonce)
        if found is None or found.status != "ok" or found.item_id is None:
            raise CheckinNotFound
        product_id = uuid.UUID(found.answer["product_id"])
        product = await products.share_product(tx, principal.project_id, product_id)
        row = await item_repository.lock_item(tx, product, found.item_id)
        scanned = await repository.scan_of_nonce(tx, principal.project_id, nonce)
        assert scanned is not None  # scans are not deleted
        if scanned.status != "ok":  # displaced meanwhile by an earlier scan
            raise CheckinNotFound
        if scanned.annulled_at is not None:
            at = None
            if product.event_id is not None:
                at = await events.checked_in_at(tx, product.event_id, row.owner_id)
            return _annulled(scanned, scanned.annulled_at, row.redemption_count, at)
        now = utcnow()
        if now - scanned.created_at > window:
            raise AnnulWindowClosed
        await repository.annul(tx, scanned.id, now)
        owner = await get_user_row(tx, principal.project_id, UserRef("id", row.owner_id))
        row = row._replace(
            redemption_count=row.redemption_count - 1,
            redeemed_at=scanned.previous_redeemed_at,
            updated_at=now,
        )
        await item_repository.write_redemption(tx, row)
        if scanned.redemption_id is not None:
            await repository.forget_redemption(tx, scanned.redemption_id)
        checked_in_at = None
        if scanned.attendee_id is not None and product.event_id is not None:
            checked_in_at = await events.lock_check_in(tx, scanned.attendee_id)
            made = int((scanned.scanned_at or scanned.created_at).timestamp())
            if checked_in_at == made:  # this scan was the holder's earliest
                others = await repository.earliest_use_of(tx, scanned.attendee_id)
                times = [t for t in (others, scanned.previous_checked_in_at) if t is not None]
                checked_in_at = min(times, default=None)
                await events.set_checked_in(tx, scanned.attendee_id, checked_in_at, now)
                if checked_in_at is None and owner.reputation >= FIRST_CHECK_IN_REPUTATION:
                    await add_reputation(
                        tx,
                        owner,
                        delta=-FIRST_CHECK_IN_REPUTATION,
                        reason=f"check-in annulled:{product.event_id}",
                    )
        answer = _annulled(scanned, now, row.redemption_count, checked_in_at)
        await record(tx, principal.project_id, EventType.CHECKIN_ANNULLED, [answer])
        await tx.commit()
    return answer


def _found(item: TicketItem | Unreadable) -> Found | Unreadable:
    """A scanned secret's item at the version the secret was, or why it names none."""
    return item if isinstance(item, str) else Found(item.product_id, item.id, item.ticket_version)


def _items(*found: Found | Unreadable) -> list[Found]:
    return [one for one in found if not isinstance(one, str)]


def _annulled(
    scanned: ScanRow, at: datetime, redemption_count: int, checked_in_at: int | None
) -> AnnulRead:
    return AnnulRead(
        status="annulled",
        nonce=scanned.nonce,
        item_id=scanned.answer["item_id"],
        product_id=uuid.UUID(scanned.answer["product_id"]),
        annulled_at=int(at.timestamp()),
        redemption_count=redemption_count,
        checked_in_at=checked_in_at,
    )


@rerun_on_conflict
async def upload(
    database: Database, principal: Principal, *, hash_key: bytes, body: BatchRequest
) -> BatchRead:
    """Scans made offline (see the module docstring): each answers as the door decides it, in
    the request's order; the same nonce again, the same answer."""
    now = utcnow()
    # The signatures checked first, in a thread (OpenSSL lets the loop go on meanwhile), holding
    # no connection: the keys as they are now, as a door's are as of its last sync.
    keys = await database.read(ticket_keys.project_keys, principal.project_id)
    texts = [scan.secret for scan in body.scans]
    named = await asyncio.to_thread(named_items, texts, keys)
    async with database.transaction() as tx:
        items = await tickets_of_named(
            tx, principal.project_id, texts, named, keys=keys, hash_key=hash_key
        )
        found = [_found(item) for item in items]
        door = await Door.open(
            tx,
            principal,
            found=_items(*found),
            nonces=[scan.nonce for scan in body.scans],
            now=now,
        )
        made = sorted(range(len(body.scans)), key=lambda i: (body.scans[i].scanned_at, i))
        for i in made:
            scan = body.scans[i]
            at = min(scan.scanned_at.astimezone(UTC), now)
            door.decide(Scan(scan.nonce, scan.event_id, "offline", scan.device, at), found[i])
        await door.write()
        await tx.commit()
    return BatchRead(
        results=[
            BatchResult(
                nonce=scan.nonce,
                status=door.answered[scan.nonce].outcome,
                checked_in_at=door.answered[scan.nonce].body.get("checked_in_at"),
            )
            for scan in body.scans
        ]
    )


# A sync ``since`` a cursor also gives what changed in the OVERLAP before it: a change made in a
# transaction that began before the cursor was taken and ended after is not missed. A door
# merges tickets by id, so a ticket sent twice costs nothing.
OVERLAP = timedelta(seconds=30)


async def sync(
    database: Database, principal: Principal, *, event_id: uuid.UUID, since: str | None
) -> SyncRead:
    """What a door needs offline: the keys and the event's tickets (with ``since``, only
    those changed), and the cursor for next time."""
    taken = utcnow()
    changed_since = None if since is None else read_cursor(since) - OVERLAP

    async def read(rows: Rows) -> tuple[ProjectKeys, list[SyncedTicketRow]]:
        await events.get_event_row(rows, principal.project_id, event_id)
        keys = await ticket_keys.project_keys(rows, principal.project_id)
        tickets = await repository.synced_tickets(
            rows, principal.project_id, event_id, changed_since
        )
        return keys, tickets

    keys, tickets = await database.read(read)
    return SyncRead(
        keys=ticket_keys.shown(keys.live),
        tickets=[
            SyncedTicket(
                item_id=ticket.item_id,
                id=ticket.id,
                ticket_version=ticket.ticket_version,
                product_id=ticket.product_id,
                holder_name=" ".join(n for n in (ticket.first_name, ticket.last_name) if n) or None,
                redemption_count=ticket.redemption_count,
                redemption_quantity=ticket.redemption_quantity,
                checked_in_at=ticket.checked_in_at,
                seat=seat_of(ticket),
            )
            for ticket in tickets
        ],
        cursor=cursor_of(taken),
    )


def cursor_of(taken: datetime) -> str:
    """A sync's cursor: when it was taken, in Unix microseconds (the door keeps it as it is:
    ``since`` takes any such number, ``CURSOR``)."""
    return str(int(taken.timestamp() * 1_000_000))


def read_cursor(cursor: str) -> datetime:
    return datetime.fromtimestamp(int(cursor) / 1_000_000, UTC)


async def door_events(database: Database, principal: Principal) -> DoorEvents:
    """The project's events, for a door to pick one."""
    rows = await database.read(repository.door_events, principal.project_id)
    return DoorEvents(events=[DoorEvent.model_validate(row._asdict()) for row in rows])


async def list_scans(
    database: Database,
    principal: Principal,
    *,
    event_id: uuid.UUID,
    conflicts: bool,
    paging: PageParams,
) -> ScanList:
    """A page of the scans at the event's door, oldest first (``conflicts``: only the tickets
    admitted twice offline)."""

    async def read(rows: Rows) -> tuple[int, list[ListedScan]]:
        await events.get_event_row(rows, principal.project_id, event_id)
        return await repository.scans_at_event(
            rows,
            principal.project_id,
            event_id,
            conflicts=conflicts,
            limit=paging.limit,
            offset=paging.offset,
        )

    total, scans = await database.read(read)
    return ScanList(
        scans=[ScanRead.model_validate(_shown(scan._asdict())) for scan in scans],
        pagination=Pagination(page=paging.page, limit=paging.limit, total=total),
    )


def _shown(scan: dict[str, Any]) -> dict[str, Any]:
    """A listed scan names its item's id ``product_item_id``: ``item_id`` is the item's number
    in every answer."""
    scan["product_item_id"] = scan.pop("item_id")
    return scan
