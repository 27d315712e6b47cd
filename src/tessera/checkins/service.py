"""Scanning at the door: one use-case for the API (``POST /v1/checkins``) and the console's door.

A scan names a ticket by its secret (or, at the console's door, the item a person's email or
reference id found). In one transaction it redeems one use of the item and checks its holder in
at the product's event (a product without an event: the redemption alone), and records the
scan with the answer it got, refused ones too. The item's row is locked first: of 50 scans of a
single-use ticket at once, one is ``ok``. The same ``nonce`` again gets the recorded answer
again and counts once.

Within ``TESSERA_CHECKIN_ANNUL_SECONDS`` an ``ok`` scan can be annulled: the use is given back
(its redemption deleted, the item's count and last redemption time as they were) and the
attendee's check-in time returns to what it was, unless a later scan has moved it since. A
first check-in's reputation point is taken back when the balance still has it.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from tessera import ticket_codes as codes
from tessera.auth.principal import Principal
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.checkins import repository
from tessera.checkins.repository import ScanRow
from tessera.checkins.schemas import (
    AnnulRead,
    CheckinCreated,
    CheckinRead,
    CheckinRefused,
    Holder,
)
from tessera.db import Database, Transaction
from tessera.errors import AnnulWindowClosed, CheckinNotFound
from tessera.events import repository as events
from tessera.events.schemas import AttendeeRegistered
from tessera.events.service import FIRST_CHECK_IN_REPUTATION, attendee_at, check_in
from tessera.models import NftStatus
from tessera.models.base import new_id, utcnow
from tessera.products import repository as products
from tessera.products.rows import ProductRow, item_of
from tessera.products.schemas import ProductItemRead, is_fully_redeemed
from tessera.tickets.service import item_of_code
from tessera.users.repository import add_reputation, get_user_row
from tessera.users.schemas import UserRef

Reason = Literal["already_checked_in", "wrong_event", "unknown", "held_outside"]
Outcome = Literal["ok", Reason]
Source = Literal["api", "console"]


@dataclass(frozen=True, slots=True)
class Scanned:
    """A scan's outcome (``ok``, or why it was refused) and its answer (``CheckinRead`` or
    ``CheckinRefused``)."""

    outcome: Outcome
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


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
        found = await item_of_code(tx, codes.Use.SECRET, secret, hash_key=hash_key)
        if found is None or found.project_id != principal.project_id:
            answer = await _refused(tx, principal, nonce, event_id, source, None, "unknown")
        else:
            answer = await _scan_item(
                tx, principal, found.product_id, found.id, nonce, event_id, source
            )
        await tx.commit()
    return answer


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
        answer = await _scan_item(tx, principal, product_id, item_id, nonce, event_id, source)
        await tx.commit()
    return answer


async def _scan_item(
    tx: Transaction,
    principal: Principal,
    product_id: uuid.UUID,
    item_id: uuid.UUID,
    nonce: str,
    event_id: uuid.UUID | None,
    source: Source,
) -> Scanned:
    # Products first, then the item (as redemptions lock them): scans of one item queue here.
    product = await products.share_product(tx, principal.project_id, product_id)
    row = await products.lock_item(tx, product, item_id)
    earlier = await repository.scan_of_nonce(tx, principal.project_id, nonce)
    if earlier is not None:
        return Scanned(cast(Outcome, earlier.status), earlier.answer)
    if event_id is not None and product.event_id != event_id:
        return await _refused(tx, principal, nonce, event_id, source, row.id, "wrong_event")
    if row.nft_status == NftStatus.EXTERNAL:
        return await _refused(tx, principal, nonce, event_id, source, row.id, "held_outside")
    owner = await get_user_row(tx, principal.project_id, UserRef("id", row.owner_id))
    if is_fully_redeemed(row.redemption_count, product):
        last = await _checked_in_at(tx, product, row.owner_id) or row.redeemed_at
        return await _refused(
            tx, principal, nonce, event_id, source, row.id, "already_checked_in", last
        )

    now = utcnow()
    at = int(now.timestamp())
    item = item_of(row, product=product, owner=owner)._replace(
        redemption_count=row.redemption_count + 1, redeemed_at=at, updated_at=now
    )
    await products.write_redemption(tx, item)
    redemption_id = new_id()
    await products.add_redemption(
        tx,
        {
            "id": redemption_id,
            "item_id": item.id,
            "nonce": None,  # the scan's nonce is the check-in's (``checkins``)
            "redemption_count": item.redemption_count,
            "redeemed_at": at,
        },
    )
    attendee_id, before = None, None
    if product.event_id is not None:
        attendee_id = await attendee_at(tx, principal.project_id, product.event_id, owner.id, now)
        before = await check_in(tx, attendee_id, owner, product.event_id, at, now)
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
        _scan_values(principal, nonce, event_id, source, row.id, "ok", body)
        | {
            "attendee_id": attendee_id,
            "redemption_id": redemption_id,
            "checked_in_at": at,
            "previous_checked_in_at": before,
            "previous_redeemed_at": row.redeemed_at,
            "created_at": now,
        },
    )
    await record(tx, principal.project_id, EventType.ITEM_REDEEMED, [ProductItemRead.of(item)])
    if attendee_id is not None and product.event_id is not None and before != at:
        event = await events.get_event_row(tx, principal.project_id, product.event_id)
        attendee = await events.read_registered(tx, attendee_id, user=owner, event=event)
        checked = AttendeeRegistered.model_validate(attendee)
        await record(tx, principal.project_id, EventType.ATTENDEE_CHECKED_IN, [checked])
    await record(
        tx, principal.project_id, EventType.CHECKIN_CREATED, [CheckinCreated(**body, nonce=nonce)]
    )
    return Scanned("ok", body)


async def _checked_in_at(tx: Transaction, product: ProductRow, user_id: uuid.UUID) -> int | None:
    """The holder's check-in time at the product's event, if there is one."""
    if product.event_id is None:
        return None
    return await events.checked_in_at(tx, product.event_id, user_id)


async def _refused(
    tx: Transaction,
    principal: Principal,
    nonce: str,
    event_id: uuid.UUID | None,
    source: Source,
    item_id: uuid.UUID | None,
    reason: Reason,
    checked_in_at: int | None = None,
) -> Scanned:
    """A refused scan, recorded with its answer (unless its nonce was recorded meanwhile: then
    that scan's answer)."""
    body = CheckinRefused(
        message=MESSAGES[reason], reason=reason, checked_in_at=checked_in_at
    ).model_dump(mode="json")
    values = _scan_values(principal, nonce, event_id, source, item_id, reason, body)
    if await repository.add_scan(tx, values) is None:
        earlier = await repository.scan_of_nonce(tx, principal.project_id, nonce)
        assert earlier is not None  # the conflict was its row
        return Scanned(cast(Outcome, earlier.status), earlier.answer)
    return Scanned(reason, body)


MESSAGES: dict[Reason, str] = {
    "already_checked_in": "this ticket has been used already",
    "wrong_event": "this ticket is for another event",
    "unknown": "no such ticket: unknown, reissued since, or of another project",
    "held_outside": "this ticket's NFT is held outside the project: it cannot be used until it "
    "comes back",
}


def _scan_values(
    principal: Principal,
    nonce: str,
    event_id: uuid.UUID | None,
    source: Source,
    item_id: uuid.UUID | None,
    status: Outcome,
    body: dict[str, Any],
) -> dict[str, Any]:
    return {
        "project_id": principal.project_id,
        "nonce": nonce,
        "status": status,
        "answer": body,
        "source": source,
        "event_id": event_id,
        "item_id": item_id,
    }


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
