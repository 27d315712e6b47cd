"""Scanning at the door: one use-case for the API (``POST /v1/checkins``) and the console's door.

A scan names a ticket by its secret (or, at the console's door, the item a person's email or
reference id found). In one transaction it redeems one use of the item and checks its holder in
at the product's event (a product without an event: the redemption alone), and records the
scan with the answer it got, refused ones too. The item's row is locked first: of 50 scans of a
single-use ticket at once, one is ``ok``. The same ``nonce`` again gets the recorded answer
again and counts once. Any text that is not a ticket of the project is ``unknown``; a signed
secret whose signature does not hold ``invalid``; an older version's ``revoked``
(``tickets.service.ticket_of_secret``).

Scans made offline (``upload``) arrive later, in batches, each with the time it was made and
its device; it is checked in at that time. A batch is one transaction: its items are locked
first, in one order (two batches at once cannot deadlock), and its scans taken in the order
they were made. A scan refused because another scan used the ticket meanwhile, recorded before
this one was uploaded, was admitted at a door that could not know: a conflict, recorded with
the scan it lost to, and the holder's check-in time becomes the earlier of the two.

Within ``TESSERA_CHECKIN_ANNUL_SECONDS`` an ``ok`` scan can be annulled: the use is given back
(its redemption deleted, the item's count and last redemption time as they were) and the
attendee's check-in time returns to what it was, unless a later scan has moved it since. A
first check-in's reputation point is taken back when the balance still has it.
"""

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

from tessera.auth.principal import Principal
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.checkins import repository
from tessera.checkins.repository import ListedScan, ScanRow, SyncedTicketRow
from tessera.checkins.schemas import (
    AnnulRead,
    BatchRead,
    BatchRequest,
    BatchResult,
    CheckinCreated,
    CheckinRead,
    CheckinRefused,
    DoorEvent,
    DoorEvents,
    Holder,
    Outcome,
    Reason,
    ScanList,
    ScanRead,
    SyncedTicket,
    SyncRead,
)
from tessera.db import Database, Rows, Transaction, rerun_on_conflict
from tessera.errors import AnnulWindowClosed, CheckinNotFound
from tessera.events import repository as events
from tessera.events.repository import EventRow
from tessera.events.schemas import AttendeeRegistered
from tessera.events.service import FIRST_CHECK_IN_REPUTATION, attendee_at, check_in
from tessera.models import NftStatus
from tessera.models.base import new_id, utcnow
from tessera.products import repository as products
from tessera.products.rows import ItemRow, ProductRow, item_of
from tessera.products.schemas import ProductItemRead, is_fully_redeemed
from tessera.schemas import PageParams, Pagination
from tessera.ticket_keys import service as ticket_keys
from tessera.ticket_keys.service import ProjectKeys
from tessera.tickets.repository import TicketItem
from tessera.tickets.service import ticket_of_secret, tickets_of_secrets
from tessera.users.repository import UserRow, add_reputation, get_user_row, users_by
from tessera.users.schemas import UserRef

Source = Literal["api", "console", "offline"]


@dataclass(frozen=True, slots=True)
class Scan:
    """What every scan records of itself: its nonce, the event whose door asked (None: any),
    where it came from; for one made offline, its device and when it was made."""

    nonce: str
    event_id: uuid.UUID | None
    source: Source
    device: str | None = None
    scanned_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Scanned:
    """A scan's outcome (``ok``, or why it was refused) and its answer (``CheckinRead`` or
    ``CheckinRefused``)."""

    outcome: Outcome
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


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
    done = Scan(nonce, event_id, source)
    async with database.transaction() as tx:
        keys = await ticket_keys.project_keys(tx, principal.project_id)
        found = await ticket_of_secret(
            tx, principal.project_id, secret, keys=keys, hash_key=hash_key
        )
        if isinstance(found, str):
            answer = await _refused(tx, principal, done, None, found)
        else:
            answer = await _scan_item(tx, principal, found.product_id, found.id, done)
        await tx.commit()
    return answer


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
    id), by the same rules as a scanned secret."""
    async with database.transaction() as tx:
        answer = await _scan_item(tx, principal, product_id, item_id, Scan(nonce, event_id, source))
        await tx.commit()
    return answer


@dataclass(slots=True)
class Batch:
    """What an upload reads once for all its scans, under its locks: the products (share-locked)
    and the holders of its items, and the answers of the nonces it carries, known already or
    given in it."""

    products: dict[uuid.UUID, ProductRow]
    items: dict[uuid.UUID, ItemRow]  # as the batch's scans leave them
    owners: dict[uuid.UUID, UserRow]
    answered: dict[str, Scanned]
    events: dict[uuid.UUID, EventRow]


async def _scan_item(
    tx: Transaction,
    principal: Principal,
    product_id: uuid.UUID,
    item_id: uuid.UUID,
    scan: Scan,
    batch: Batch | None = None,
) -> Scanned:
    # Products first, then the item (as redemptions lock them): scans of one item queue here.
    # (A batch has locked them all already; the item is read again, as a scan before this one
    # may have used it.)
    if batch is None:
        product = await products.share_product(tx, principal.project_id, product_id)
        row = await products.lock_item(tx, product, item_id)
        earlier = await repository.scan_of_nonce(tx, principal.project_id, scan.nonce)
        if earlier is not None:
            return Scanned(cast(Outcome, earlier.status), earlier.answer)
    else:
        product, row = batch.products[product_id], batch.items[item_id]
    if scan.event_id is not None and product.event_id != scan.event_id:
        return await _refused(tx, principal, scan, row.id, "wrong_event")
    if row.nft_status == NftStatus.EXTERNAL:
        return await _refused(tx, principal, scan, row.id, "held_outside")
    owner = None if batch is None else batch.owners.get(row.owner_id)
    if owner is None:
        owner = await get_user_row(tx, principal.project_id, UserRef("id", row.owner_id))
    now = utcnow()
    at = int(now.timestamp() if scan.scanned_at is None else scan.scanned_at.timestamp())
    if is_fully_redeemed(row.redemption_count, product):
        last = await _checked_in_at(tx, product, row.owner_id) or row.redeemed_at
        conflict = None
        if scan.scanned_at is not None:
            conflict, last = await _conflict(
                tx, principal, product, row.id, owner, at, now, last, batch
            )
        return await _refused(tx, principal, scan, row.id, "already_checked_in", last, conflict)

    item = item_of(row, product=product, owner=owner)._replace(
        redemption_count=row.redemption_count + 1,
        redeemed_at=at if row.redeemed_at is None else max(at, row.redeemed_at),
        updated_at=now,
    )
    await products.write_redemption(tx, item)
    if batch is not None:
        batch.items[row.id] = row._replace(
            redemption_count=item.redemption_count, redeemed_at=item.redeemed_at
        )
    redemption_id = new_id()
    products.stage_redemption(
        tx,
        {
            "id": redemption_id,
            "item_id": item.id,
            "nonce": None,  # the scan's nonce is the check-in's (``checkins``)
            "redemption_count": item.redemption_count,
            "redeemed_at": at,
        },
    )
    attendee_id, before, checked_in_at = None, None, at
    if product.event_id is not None:
        attendee_id = await attendee_at(tx, principal.project_id, product.event_id, owner.id, now)
        # A scan uploaded late does not move a later check-in back.
        late = scan.scanned_at is not None
        before = await check_in(tx, attendee_id, owner, product.event_id, at, now, keep_later=late)
        if late and before is not None:
            checked_in_at = max(before, at)
    body = CheckinRead(
        status="ok",
        item_id=item.item_id,
        product_id=product.id,
        event_id=product.event_id,
        checked_in_at=at,
        holder=Holder.model_validate(owner),
        redemption_count=item.redemption_count,
        redemption_quantity=product.redemption_quantity,
    ).model_dump(mode="json")
    await repository.add_scan(
        tx,
        _scan_values(principal, scan, row.id, "ok", body)
        | {
            "attendee_id": attendee_id,
            "redemption_id": redemption_id,
            "checked_in_at": checked_in_at,
            "previous_checked_in_at": before,
            "previous_redeemed_at": row.redeemed_at,
            "created_at": now,
        },
    )
    await record(tx, principal.project_id, EventType.ITEM_REDEEMED, [ProductItemRead.of(item)])
    if attendee_id is not None and product.event_id is not None and before != checked_in_at:
        await _checked_in_change(tx, principal, product.event_id, attendee_id, owner, batch)
    await record(
        tx,
        principal.project_id,
        EventType.CHECKIN_CREATED,
        [CheckinCreated(**body, nonce=scan.nonce)],
    )
    return Scanned("ok", body)


async def _conflict(
    tx: Transaction,
    principal: Principal,
    product: ProductRow,
    item_id: uuid.UUID,
    owner: UserRow,
    at: int,
    now: datetime,
    last: int | None,
    batch: Batch | None,
) -> tuple[uuid.UUID | None, int | None]:
    """For a scan made offline at ``at`` of a ticket with no use left: the scan that took its
    last use, when that was recorded after this one was made (a conflict: a door that could
    not know admitted it too), and the holder's check-in time, made the earlier of the two."""
    winner = await repository.last_ok_scan(tx, item_id)
    if winner is None or winner.created_at.timestamp() <= at:
        return None, last
    if product.event_id is None or winner.attendee_id is None:
        return winner.id, last
    checked_in_at = await events.lock_check_in(tx, winner.attendee_id)
    if checked_in_at is not None and at < checked_in_at:
        await events.set_checked_in(tx, winner.attendee_id, at, now)
        await _checked_in_change(tx, principal, product.event_id, winner.attendee_id, owner, batch)
        checked_in_at = at
    return winner.id, checked_in_at


async def _checked_in_change(
    tx: Transaction,
    principal: Principal,
    event_id: uuid.UUID,
    attendee_id: uuid.UUID,
    owner: UserRow,
    batch: Batch | None,
) -> None:
    event = None if batch is None else batch.events.get(event_id)
    if event is None:
        event = await events.get_event_row(tx, principal.project_id, event_id)
        if batch is not None:
            batch.events[event_id] = event
    attendee = await events.read_registered(tx, attendee_id, user=owner, event=event)
    checked = AttendeeRegistered.model_validate(attendee)
    await record(tx, principal.project_id, EventType.ATTENDEE_CHECKED_IN, [checked])


async def _checked_in_at(tx: Transaction, product: ProductRow, user_id: uuid.UUID) -> int | None:
    """The holder's check-in time at the product's event, if there is one."""
    if product.event_id is None:
        return None
    return await events.checked_in_at(tx, product.event_id, user_id)


async def _refused(
    tx: Transaction,
    principal: Principal,
    scan: Scan,
    item_id: uuid.UUID | None,
    reason: Reason,
    checked_in_at: int | None = None,
    conflict_of: uuid.UUID | None = None,
) -> Scanned:
    """A refused scan, recorded with its answer (unless its nonce was recorded meanwhile: then
    that scan's answer)."""
    body = CheckinRefused(
        message=MESSAGES[reason], reason=reason, checked_in_at=checked_in_at
    ).model_dump(mode="json")
    values = _scan_values(principal, scan, item_id, reason, body) | {"conflict_of": conflict_of}
    if await repository.add_scan(tx, values) is None:
        earlier = await repository.scan_of_nonce(tx, principal.project_id, scan.nonce)
        assert earlier is not None  # the conflict was its row
        return Scanned(cast(Outcome, earlier.status), earlier.answer)
    return Scanned(reason, body)


MESSAGES: dict[Reason, str] = {
    "already_checked_in": "this ticket has been used already",
    "wrong_event": "this ticket is for another event",
    "unknown": "no such ticket: not a ticket of this project",
    "invalid": "this secret's signature does not hold: it was not made by this project",
    "revoked": "this secret has been replaced (the ticket was reissued or passed on): ask the "
    "holder for the current one",
    "held_outside": "this ticket's NFT is held outside the project: it cannot be used until it "
    "comes back",
}


def _scan_values(
    principal: Principal,
    scan: Scan,
    item_id: uuid.UUID | None,
    status: Outcome,
    body: dict[str, Any],
) -> dict[str, Any]:
    return {
        "project_id": principal.project_id,
        "nonce": scan.nonce,
        "status": status,
        "answer": body,
        "source": scan.source,
        "event_id": scan.event_id,
        "item_id": item_id,
        "device": scan.device,
        "scanned_at": scan.scanned_at,
    }


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
        row = await products.lock_item(tx, product, found.item_id)
        scanned = await repository.scan_of_nonce(tx, principal.project_id, nonce)
        assert scanned is not None  # scans are not deleted
        if scanned.annulled_at is not None:
            return _annulled(
                scanned,
                scanned.annulled_at,
                row.redemption_count,
                await _checked_in_at(tx, product, row.owner_id),
            )
        now = utcnow()
        if now - scanned.created_at > window:
            raise AnnulWindowClosed
        await repository.annul(tx, scanned.id, now)
        owner = await get_user_row(tx, principal.project_id, UserRef("id", row.owner_id))
        item = item_of(row, product=product, owner=owner)._replace(
            redemption_count=row.redemption_count - 1,
            redeemed_at=scanned.previous_redeemed_at,
            updated_at=now,
        )
        await products.write_redemption(tx, item)
        if scanned.redemption_id is not None:
            await repository.forget_redemption(tx, scanned.redemption_id)
        checked_in_at = None
        if scanned.attendee_id is not None and product.event_id is not None:
            checked_in_at = await events.lock_check_in(tx, scanned.attendee_id)
            if checked_in_at == scanned.checked_in_at:  # no later scan moved it since
                checked_in_at = scanned.previous_checked_in_at
                await events.set_checked_in(tx, scanned.attendee_id, checked_in_at, now)
                if checked_in_at is None and owner.reputation >= FIRST_CHECK_IN_REPUTATION:
                    await add_reputation(
                        tx,
                        owner,
                        delta=-FIRST_CHECK_IN_REPUTATION,
                        reason=f"check-in annulled:{product.event_id}",
                    )
        answer = _annulled(scanned, now, item.redemption_count, checked_in_at)
        await record(tx, principal.project_id, EventType.CHECKIN_ANNULLED, [answer])
        await tx.commit()
    return answer


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
    """Scans made offline (see the module docstring): each answers as it would have online at
    the time it was made, in the request's order; the same nonce again, the same answer."""
    now = utcnow()
    async with database.transaction() as tx:
        keys = await ticket_keys.project_keys(tx, principal.project_id)
        found = await tickets_of_secrets(
            tx,
            principal.project_id,
            [scan.secret for scan in body.scans],
            keys=keys,
            hash_key=hash_key,
        )
        items = [item for item in found if not isinstance(item, str)]
        batch = await _prepare(tx, principal, items, [scan.nonce for scan in body.scans])
        answers: dict[int, Scanned] = {}
        made = sorted(range(len(body.scans)), key=lambda i: (body.scans[i].scanned_at, i))
        for i in made:
            scan, item = body.scans[i], found[i]
            earlier = batch.answered.get(scan.nonce)
            if earlier is not None:
                answers[i] = earlier
                continue
            done = Scan(
                scan.nonce,
                scan.event_id,
                "offline",
                scan.device,
                min(scan.scanned_at.astimezone(UTC), now),
            )
            if isinstance(item, str):
                answers[i] = await _refused(tx, principal, done, None, item)
            else:
                answers[i] = await _scan_item(tx, principal, item.product_id, item.id, done, batch)
            batch.answered[scan.nonce] = answers[i]
        await tx.commit()
    return BatchRead(
        results=[
            BatchResult(
                nonce=scan.nonce,
                status=answers[i].outcome,
                checked_in_at=answers[i].body.get("checked_in_at"),
            )
            for i, scan in enumerate(body.scans)
        ]
    )


async def _prepare(
    tx: Transaction, principal: Principal, items: list[TicketItem], nonces: list[str]
) -> Batch:
    """The batch's products share-locked, then its items locked in one statement, each in id
    order (two batches, or a batch and a scan, wait for each other, never deadlock); then what
    it reads once: its holders, and the scans its nonces made already."""
    locked = {
        product_id: await products.share_product(tx, principal.project_id, product_id)
        for product_id in sorted({item.product_id for item in items})
    }
    rows = await products.lock_items(tx, [item.id for item in items]) if items else {}
    owners, _ = await users_by(
        tx, principal.project_id, ids=[item.owner_id for item in items], emails=[]
    )
    known = await repository.scans_of_nonces(tx, principal.project_id, nonces)
    answered = {
        nonce: Scanned(cast(Outcome, scan.status), scan.answer) for nonce, scan in known.items()
    }
    return Batch(locked, rows, owners, answered, {})


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
        data=[ScanRead.model_validate(scan._asdict()) for scan in scans],
        pagination=Pagination(page=paging.page, limit=paging.limit, total=total),
    )
