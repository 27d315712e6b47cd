from datetime import timedelta
from typing import Any

from fastapi.responses import JSONResponse

from tessera.auth.dependencies import CallerDep, project_router
from tessera.checkins import service
from tessera.checkins.schemas import (
    AnnulRead,
    AnnulRequest,
    CheckinRead,
    CheckinRefused,
    CheckinRequest,
)
from tessera.checkins.service import Outcome, Scanned
from tessera.errors import responses

router = project_router("/checkins", tags=["checkins"])

REFUSED: dict[int | str, dict[str, Any]] = {
    404: {
        "model": CheckinRefused,
        "description": "`reason` `unknown`: no such ticket (unknown, reissued, another project's).",
    },
    409: {
        "model": CheckinRefused,
        "description": "`reason` `already_checked_in` (with `checked_in_at`), `wrong_event` or "
        "`held_outside` (its NFT sits outside the project).",
    },
}


# What each outcome of a scan answers: refused for a ticket that is not there, 404; for one that
# is there but cannot be used now, 409.
STATUS: dict[Outcome, int] = {
    "ok": 200,
    "unknown": 404,
    "already_checked_in": 409,
    "wrong_event": 409,
    "held_outside": 409,
}


def status_of(scanned: Scanned) -> int:
    return STATUS[scanned.outcome]


@router.post("", response_model=CheckinRead, responses=responses(400, 401, 403) | REFUSED)
async def check_in(caller: CallerDep, body: CheckinRequest) -> JSONResponse:
    """Scan a ticket at the door (what a scanner calls, modelled on pretix's check-in): its
    holder is checked in at the product's event (the attendee's `checked_in_at`) and one use of
    the item is redeemed, in one transaction; a product without an event is checked in by the
    redemption alone. The same `nonce` again answers the first answer again and counts once.
    Every scan is recorded, refused ones too (the console's door shows them). Fires
    `checkin.created` (and `item.redeemed`, `attendee.checked_in`)."""
    scanned = await service.scan(
        caller.database,
        caller.principal,
        hash_key=caller.settings.hash_key_bytes,
        secret=body.secret,
        nonce=body.nonce,
        event_id=body.event_id,
    )
    return JSONResponse(scanned.body, status_code=status_of(scanned))


@router.post("/annul", response_model=AnnulRead, responses=responses(400, 401, 403, 404, 409))
async def annul_check_in(caller: CallerDep, body: AnnulRequest) -> AnnulRead:
    """Undo the check-in of `nonce` within `TESSERA_CHECKIN_ANNUL_SECONDS` (900) of its scan: the
    use is given back and the attendee's `checked_in_at` returns to what it was, so the next
    scan is `ok` again. Annulling again answers the same; after the window 409, a nonce that
    checked nothing in 404. Fires `checkin.annulled`."""
    window = timedelta(seconds=caller.settings.checkin_annul_seconds)
    return await service.annul(caller.database, caller.principal, nonce=body.nonce, window=window)
