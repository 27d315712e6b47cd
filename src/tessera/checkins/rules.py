"""How the door decides: every scan, made online or offline, one at a time or 500 in an upload,
goes through one ``Door``, in the transaction of its use-case.

A door takes its locks first, in the order docs/design.md states (Locks): the products of the
scans' items (shared), the items (one statement, in id order), the attendee records there are
of their holders at the products' events (in (event, user) order). Then it decides each scan
in the order the scans were made, in memory, and writes what they changed at once
(``write``): an upload of 500 scans costs a few statements, not a few per scan. Writing, it
takes the rest in the same order: the attendee records its check-ins need that were not there
(written, then locked, in (event, user) order; one that another transaction wrote meanwhile
runs the use-case again, ``rerun_on_conflict``), then the holders whose first check-in it made
(id order). A refused scan writes nothing but itself: no attendee record is written for it.

**Uses go to the earliest scans.** A scan with a use left takes it (``ok``). A scan made
offline before the scan that holds a ticket's last use takes that use over: it is ``ok``, and
the later scan becomes ``already_checked_in``, a conflict with it (a ``checkin.displaced``
change), so that whatever order doors upload in, the earliest scan wins. A scan that finds no
use left is ``already_checked_in``: a conflict when the scan holding the use was recorded after
it was made (an offline door that could not know admitted it), else a plain refusal. **A
holder's check-in time** at an event is the earliest of their scans there: a scan moves it only
earlier.
"""

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

from pydantic import BaseModel

from tessera.auth.principal import Principal
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.checkins import repository
from tessera.checkins.schemas import (
    CheckinCreated,
    CheckinDisplaced,
    CheckinRead,
    CheckinRefused,
    Holder,
    Outcome,
    Reason,
)
from tessera.db import Transaction
from tessera.errors import TransactionConflict
from tessera.events import repository as events
from tessera.events.repository import AttendeeRow, EventRow, RegisteredAttendee
from tessera.events.schemas import AttendeeRegistered
from tessera.models import NftStatus
from tessera.models.base import new_id
from tessera.products import item_repository
from tessera.products import repository as products
from tessera.products.item_schemas import ProductItemRead
from tessera.products.rows import Item, ItemRow, ProductRow
from tessera.products.schemas import is_fully_redeemed
from tessera.users.repository import UserRow, users_by
from tessera.users.reputation_repository import add_a_point_each

Source = Literal["api", "console", "offline"]

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


@dataclass(frozen=True, slots=True)
class Found:
    """A scanned item: which, and at which ``ticket_version`` its secret was (None: the item
    was named another way, at the console's door)."""

    product_id: uuid.UUID
    item_id: uuid.UUID
    version: int | None = None


@dataclass(slots=True)
class Use:
    """An ok scan: it holds one of its item's uses."""

    scan_id: uuid.UUID
    nonce: str
    made: int  # Unix seconds
    recorded_at: datetime
    redemption_id: uuid.UUID | None


@dataclass(slots=True)
class Ticket:
    """A scanned item as the door's scans leave it, and the scans that hold its uses."""

    row: ItemRow
    product: ProductRow
    uses: list[Use]
    changed: bool = False


@dataclass
class Door:
    """One transaction's scans: what it locked and read (``open``), what its scans decided
    (``decide``), and what they changed, written at once (``write``)."""

    tx: Transaction
    principal: Principal
    now: datetime
    tickets: dict[uuid.UUID, Ticket]
    owners: dict[uuid.UUID, UserRow]
    attendees: dict[tuple[uuid.UUID, uuid.UUID], AttendeeRow]
    events: dict[uuid.UUID, EventRow]
    answered: dict[str, Scanned]
    planned: set[tuple[uuid.UUID, uuid.UUID]]  # attendee records to write if a scan needs one
    scans: list[dict[str, Any]] = field(default_factory=list)
    displaced: list[dict[str, Any]] = field(default_factory=list)
    redemptions: list[dict[str, Any]] = field(default_factory=list)
    moved: list[tuple[uuid.UUID, int]] = field(default_factory=list)
    checked_in: dict[tuple[uuid.UUID, uuid.UUID], bool] = field(default_factory=dict)
    changes: list[tuple[EventType, BaseModel]] = field(default_factory=list)

    @classmethod
    async def open(
        cls,
        tx: Transaction,
        principal: Principal,
        *,
        found: list[Found],
        nonces: list[str],
        now: datetime,
    ) -> "Door":
        """The door of these scans: their products share-locked (in id order), their items
        locked (one statement, in id order), their holders read, the holders' attendee records
        at the events written where missing and locked; then the answers their nonces got
        already, and the scans that hold the items' uses."""
        project_id = principal.project_id
        locked = {
            product_id: await products.share_product(tx, project_id, product_id)
            for product_id in sorted({one.product_id for one in found})
        }
        rows = await item_repository.lock_items(tx, [one.item_id for one in found]) if found else {}
        tickets = {
            row.id: Ticket(row, locked[row.product_id], [])
            for row in rows.values()
            if row.product_id in locked
        }
        owners, _ = await users_by(
            tx, project_id, ids=[t.row.owner_id for t in tickets.values()], emails=[]
        )
        at_events = [
            (t.product.event_id, t.row.owner_id)
            for t in tickets.values()
            if t.product.event_id is not None
        ]
        attendees = await events.lock_attendees(tx, at_events) if at_events else {}
        registered_at = int(now.timestamp())
        planned = {
            (event_id, user_id): AttendeeRow(
                project_id, event_id, user_id, registered_at, None, new_id(), now, now
            )
            for event_id, user_id in set(at_events) - attendees.keys()
        }
        shown = {
            event_id: await events.get_event_row(tx, project_id, event_id)
            for event_id in sorted({event_id for event_id, _ in at_events})
        }
        known = await repository.scans_of_nonces(tx, project_id, nonces)
        for use in await repository.uses_of(tx, sorted(tickets)):
            tickets[use.item_id].uses.append(
                Use(
                    use.id,
                    use.nonce,
                    _made(use.scanned_at, use.created_at),
                    use.created_at,
                    use.redemption_id,
                )
            )
        answered = {
            nonce: Scanned(cast(Outcome, scan.status), scan.answer) for nonce, scan in known.items()
        }
        return cls(
            tx, principal, now, tickets, owners, attendees | planned, shown, answered, set(planned)
        )

    def decide(self, scan: Scan, found: Found | Reason) -> Scanned:
        """The scan's answer: the one its nonce got already, else decided now (see the module
        docstring); scans are decided in the order they were made."""
        earlier = self.answered.get(scan.nonce)
        if earlier is not None:
            return earlier
        if isinstance(found, str):
            answer = self._refused(scan, None, found)
        else:
            answer = self._decide(scan, found)
        self.answered[scan.nonce] = answer
        return answer

    def _decide(self, scan: Scan, found: Found) -> Scanned:
        ticket = self.tickets.get(found.item_id)
        if ticket is None:  # gone since its secret was read
            return self._refused(scan, None, "unknown")
        row, product = ticket.row, ticket.product
        if found.version is not None and found.version != row.ticket_version:
            return self._refused(scan, row.id, "revoked")  # reissued or passed on meanwhile
        if scan.event_id is not None and product.event_id != scan.event_id:
            return self._refused(scan, row.id, "wrong_event")
        if row.nft_status == NftStatus.EXTERNAL:
            return self._refused(scan, row.id, "held_outside")
        at = _made(scan.scanned_at, self.now)
        if not is_fully_redeemed(row.redemption_count, product):
            return self._admit(scan, ticket, at)
        later = [use for use in ticket.uses if use.made > at]
        if scan.scanned_at is not None and later:
            return self._take_over(scan, ticket, max(later, key=lambda use: use.made), at)
        holder = self._attendee(ticket)
        last = holder.checked_in_at if holder is not None else None
        winner = max(ticket.uses, key=lambda use: (use.made, use.recorded_at), default=None)
        conflict = None
        if scan.scanned_at is not None and winner is not None:
            if winner.recorded_at.timestamp() > at:  # a door that could not know admitted it
                conflict = winner.scan_id
        return self._refused(
            scan, row.id, "already_checked_in", last or row.redeemed_at, conflict_of=conflict
        )

    def _attendee(self, ticket: Ticket) -> AttendeeRow | None:
        event_id = ticket.product.event_id
        return None if event_id is None else self.attendees[(event_id, ticket.row.owner_id)]

    def _check_in(self, ticket: Ticket, at: int) -> tuple[uuid.UUID | None, int | None, int]:
        """The holder checked in at ``at`` unless they were earlier: their attendee record, and
        their check-in time before and after."""
        attendee = self._attendee(ticket)
        if attendee is None:
            return None, None, at
        before = attendee.checked_in_at
        after = at if before is None else min(before, at)
        if after != before:
            key = (attendee.event_id, attendee.user_id)
            self.attendees[key] = attendee._replace(checked_in_at=after, updated_at=self.now)
            self.checked_in[key] = self.checked_in.get(key, False) or before is None
        return attendee.id, before, after

    def _registered(self, ticket: Ticket) -> AttendeeRegistered:
        """The holder's attendee record at the ticket's event as it now is."""
        attendee = self._attendee(ticket)
        assert attendee is not None
        return AttendeeRegistered.model_validate(
            RegisteredAttendee(
                attendee.id,
                attendee.created_at,
                attendee.updated_at,
                attendee.event_id,
                self.owners[attendee.user_id],
                attendee.registered_at,
                attendee.checked_in_at,
                self.events[attendee.event_id],
            )
        )

    def _admit(self, scan: Scan, ticket: Ticket, at: int) -> Scanned:
        row, product = ticket.row, ticket.product
        ticket.row = row._replace(
            redemption_count=row.redemption_count + 1,
            redeemed_at=at if row.redeemed_at is None else max(at, row.redeemed_at),
            updated_at=self.now,
        )
        ticket.changed = True
        redemption_id = new_id()
        self.redemptions.append(
            {
                "id": redemption_id,
                "item_id": row.id,
                "nonce": None,  # the scan's nonce is the check-in's (``checkins``)
                "redemption_count": ticket.row.redemption_count,
                "redeemed_at": at,
            }
        )
        owner = self.owners[row.owner_id]
        item = Item(ticket.row, product=product, owner=owner)
        self.changes.append((EventType.ITEM_REDEEMED, ProductItemRead.of(item)))
        return self._ok(scan, ticket, at, redemption_id, previous_redeemed_at=row.redeemed_at)

    def _take_over(self, scan: Scan, ticket: Ticket, later: Use, at: int) -> Scanned:
        """``later``'s use goes to this scan, made before it (see the module docstring)."""
        row = ticket.row
        ticket.uses.remove(later)
        kept = [use.made for use in ticket.uses] + [at]
        if row.redeemed_at is not None and row.redeemed_at != later.made:
            kept.append(row.redeemed_at)  # a redemption of another kind (the redeem call)
        ticket.row = row._replace(redeemed_at=max(kept), updated_at=self.now)
        ticket.changed = True
        if later.redemption_id is not None:
            self.moved.append((later.redemption_id, at))
        answer = self._ok(
            scan, ticket, at, later.redemption_id, previous_redeemed_at=row.redeemed_at
        )
        taker = ticket.uses[-1]
        attendee = self._attendee(ticket)
        refused = CheckinRefused(
            message=MESSAGES["already_checked_in"],
            reason="already_checked_in",
            checked_in_at=attendee.checked_in_at if attendee is not None else at,
        ).model_dump(mode="json")
        self.displaced.append(
            {
                "scan_id": later.scan_id,
                "status": "already_checked_in",
                "answer": refused,
                "conflict_of": taker.scan_id,
            }
        )
        if later.nonce in self.answered:
            self.answered[later.nonce] = Scanned("already_checked_in", refused)
        self.changes.append(
            (
                EventType.CHECKIN_DISPLACED,
                CheckinDisplaced(**refused, nonce=later.nonce, conflict_with=scan.nonce),
            )
        )
        return answer

    def _ok(
        self,
        scan: Scan,
        ticket: Ticket,
        at: int,
        redemption_id: uuid.UUID | None,
        *,
        previous_redeemed_at: int | None,
    ) -> Scanned:
        """The scan holds a use of ``ticket`` (as it now is) from ``at``: its answer, its row,
        the holder's check-in."""
        row, product = ticket.row, ticket.product
        owner = self.owners[row.owner_id]
        attendee_id, before, after = self._check_in(ticket, at)
        if attendee_id is not None and after != before:  # once a holder: the batch's earliest
            self.changes.append((EventType.ATTENDEE_CHECKED_IN, self._registered(ticket)))
        body = CheckinRead(
            status="ok",
            item_id=row.item_id,
            product_id=product.id,
            event_id=product.event_id,
            checked_in_at=at,
            holder=Holder.model_validate(owner),
            redemption_count=row.redemption_count,
            redemption_quantity=product.redemption_quantity,
        ).model_dump(mode="json")
        scan_id = new_id()
        self.scans.append(
            self._values(scan, row.id, "ok", body)
            | {
                "id": scan_id,
                "attendee_id": attendee_id,
                "redemption_id": redemption_id,
                "checked_in_at": after,
                "previous_checked_in_at": before,
                "previous_redeemed_at": previous_redeemed_at,
            }
        )
        ticket.uses.append(Use(scan_id, scan.nonce, at, self.now, redemption_id))
        self.changes.append((EventType.CHECKIN_CREATED, CheckinCreated(**body, nonce=scan.nonce)))
        return Scanned("ok", body)

    def _refused(
        self,
        scan: Scan,
        item_id: uuid.UUID | None,
        reason: Reason,
        checked_in_at: int | None = None,
        *,
        conflict_of: uuid.UUID | None = None,
    ) -> Scanned:
        body = CheckinRefused(
            message=MESSAGES[reason], reason=reason, checked_in_at=checked_in_at
        ).model_dump(mode="json")
        self.scans.append(
            self._values(scan, item_id, reason, body) | {"id": new_id(), "conflict_of": conflict_of}
        )
        return Scanned(reason, body)

    def _values(
        self, scan: Scan, item_id: uuid.UUID | None, status: Outcome, body: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "project_id": self.principal.project_id,
            "nonce": scan.nonce,
            "status": status,
            "answer": body,
            "source": scan.source,
            "event_id": scan.event_id,
            "item_id": item_id,
            "device": scan.device,
            "scanned_at": scan.scanned_at,
            "created_at": self.now,
        }

    async def write(self) -> None:
        """What the scans changed, at once: the items, their redemptions, the holders'
        check-ins and first check-in points, the scans (a conflict's after the scan it names),
        the scans displaced, and the changes."""
        tx, project_id = self.tx, self.principal.project_id
        await item_repository.write_redemptions(
            tx, [ticket.row for _, ticket in sorted(self.tickets.items()) if ticket.changed]
        )
        await item_repository.move_redemptions(tx, self.moved)
        for redemption in self.redemptions:
            item_repository.stage_redemption(tx, redemption)
        new = [self.attendees[key] for key in sorted(self.checked_in) if key in self.planned]
        if new:
            registered = await events.add_attendees(tx, new)
            if any(registered[(a.event_id, a.user_id)].id != a.id for a in new):
                raise TransactionConflict  # another check-in of the holder was first: again
        changed = [
            self.attendees[key] for key in sorted(self.checked_in) if key not in self.planned
        ]
        await events.write_check_ins(tx, changed)
        for event_id in sorted({key[0] for key, first in self.checked_in.items() if first}):
            firsts = [
                self.owners[user_id]
                for (event, user_id), first in self.checked_in.items()
                if first and event == event_id
            ]
            await add_a_point_each(tx, firsts, reason=f"check-in:{event_id}", now=self.now)
        if self.scans:
            written = await repository.add_scans(tx, self.scans)
            await self._recorded_meanwhile([s for s in self.scans if s["id"] not in written])
        await repository.displace(tx, self.displaced)
        for kind, data in self.changes:
            await record(tx, project_id, kind, [data])

    async def _recorded_meanwhile(self, lost: list[dict[str, Any]]) -> None:
        """Scans whose nonce another transaction recorded while this one ran (the same scans
        uploaded twice at once): a refused one answers as recorded; one that changed anything
        runs the use-case again, which then finds the nonce recorded (``rerun_on_conflict``)."""
        if any(scan["status"] == "ok" for scan in lost):
            raise TransactionConflict
        if lost:
            known = await repository.scans_of_nonces(
                self.tx, self.principal.project_id, [scan["nonce"] for scan in lost]
            )
            for nonce, scan in known.items():
                self.answered[nonce] = Scanned(cast(Outcome, scan.status), scan.answer)


def _made(scanned_at: datetime | None, recorded_at: datetime) -> int:
    """When a scan was made, in Unix seconds: offline, ``scanned_at``; online, when recorded."""
    return int((scanned_at or recorded_at).timestamp())
