import uuid
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Query
from fastapi.responses import JSONResponse

from tessera.auth.dependencies import DoorReadAccess, DoorWriteAccess, ReadAccess
from tessera.checkins import service
from tessera.checkins.schemas import (
    AnnulRead,
    AnnulRequest,
    BatchRead,
    BatchRequest,
    CheckinFilter,
    CheckinRead,
    CheckinRefused,
    CheckinRequest,
    DoorEvents,
    Outcome,
    ScanList,
    SyncRead,
)
from tessera.checkins.service import Scanned
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.web.routes import project_router

router = project_router("/checkins", tags=["checkins"])

REFUSED: dict[int | str, dict[str, Any]] = {
    404: {
        "model": CheckinRefused,
        "description": "`reason` `unknown` (any text that is not a ticket of this project) or "
        "`invalid` (a secret whose signature does not hold).",
    },
    409: {
        "model": CheckinRefused,
        "description": "`reason` `already_checked_in` (with `checked_in_at`), `revoked` (an "
        "older version of the ticket's secret: reissued or passed on), `wrong_event` or "
        "`held_outside` (its NFT sits outside the project).",
    },
}


# What each outcome of a scan answers: refused for a text that names no ticket of the project,
# 404; for a ticket that is there but cannot be used now (or by this secret), 409.
STATUS: dict[Outcome, int] = {
    "ok": 200,
    "unknown": 404,
    "invalid": 404,
    "already_checked_in": 409,
    "revoked": 409,
    "wrong_event": 409,
    "held_outside": 409,
}


def status_of(scanned: Scanned) -> int:
    return STATUS[scanned.outcome]


@router.post("", response_model=CheckinRead, responses=responses(400, 401, 403) | REFUSED)
async def check_in(
    principal: DoorWriteAccess, database: DatabaseDep, settings: SettingsDep, body: CheckinRequest
) -> JSONResponse:
    """Scan a ticket at the door (what a scanner calls, modelled on pretix's check-in): its
    holder is checked in at the product's event (the attendee's `checked_in_at`) and one use of
    the item is redeemed, in one transaction; a product without an event is checked in by the
    redemption alone. The same `nonce` again answers the first answer again and counts once.
    Every scan is recorded, refused ones too (the console's door shows them). Fires
    `checkin.created` (and `item.redeemed`, `attendee.checked_in`)."""
    scanned = await service.scan(
        database,
        principal,
        hash_key=settings.hash_key_bytes,
        secret=body.secret,
        nonce=body.nonce,
        event_id=body.event_id,
    )
    return JSONResponse(scanned.body, status_code=status_of(scanned))


@router.post("/annul", response_model=AnnulRead, responses=responses(400, 401, 403, 404, 409))
async def annul_check_in(
    principal: DoorWriteAccess, database: DatabaseDep, settings: SettingsDep, body: AnnulRequest
) -> AnnulRead:
    """Undo the check-in of `nonce` within `TESSERA_CHECKIN_ANNUL_SECONDS` (900) of its scan: the
    use is given back and the attendee's `checked_in_at` returns to what it was, so the next
    scan is `ok` again. Annulling again answers the same; after the window 409, a nonce that
    checked nothing in 404. Fires `checkin.annulled`."""
    window = timedelta(seconds=settings.checkin_annul_seconds)
    return await service.annul(database, principal, nonce=body.nonce, window=window)


@router.post("/batch", response_model=BatchRead, responses=responses(400, 401, 403))
async def upload_scans(
    principal: DoorWriteAccess, database: DatabaseDep, settings: SettingsDep, body: BatchRequest
) -> BatchRead:
    """Scans a door made offline (up to 500), each checked in at its `scanned_at` by the rules
    of `POST /v1/checkins`; the results in the request's order. The same nonce again answers
    the same and changes nothing. Two doors that both admitted a single-use ticket offline get
    one `ok` and one `already_checked_in` whatever order they upload in; the holder's check-in
    time is the earlier scan's, and the other is a conflict (`GET /v1/checkins?conflicts=true`).
    A check-in key, a write key or a token may upload."""
    return await service.upload(database, principal, hash_key=settings.hash_key_bytes, body=body)


@router.get("/sync", response_model=SyncRead, responses=responses(400, 401, 403, 404))
async def sync(
    principal: DoorReadAccess,
    database: DatabaseDep,
    event_id: Annotated[uuid.UUID, Query(description="The event whose door syncs.")],
    since: Annotated[
        str | None,
        Query(
            pattern=r"^[0-9]{1,16}$",
            description="The `cursor` of the last sync: only what changed since.",
        ),
    ] = None,
) -> SyncRead:
    """What a door needs to scan offline: the project's keys that verify ticket secrets, and
    the event's tickets, each with its current `ticket_version` (a secret of an older one is
    revoked), its uses and its holder's check-in. With `since`, only the tickets changed since
    (new, reissued, passed on, used, checked in elsewhere; a ticket may come again)."""
    return await service.sync(database, principal, event_id=event_id, since=since)


@router.get("/events", response_model=DoorEvents, responses=responses(401, 403))
async def door_events(principal: DoorReadAccess, database: DatabaseDep) -> DoorEvents:
    """The project's events, for a door (a check-in key) to pick the one it scans for."""
    return await service.door_events(database, principal)


@router.get("", response_model=ScanList, responses=responses(400, 401, 403, 404))
async def list_scans(
    principal: ReadAccess, database: DatabaseDep, query: Annotated[CheckinFilter, Query()]
) -> ScanList:
    """The scans at the event's door, refused ones too, oldest first (`page` from 1, `limit`
    1-100, default 20), with the device and time of those made offline; `conflicts=true`: only
    the tickets two doors admitted offline."""
    return await service.list_scans(
        database,
        principal,
        event_id=query.event_id,
        conflicts=query.conflicts,
        paging=query,
    )
