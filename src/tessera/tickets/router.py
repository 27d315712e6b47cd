import uuid

from fastapi import Request

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.mail.dependencies import for_request
from tessera.products.item_schemas import ItemKey
from tessera.ticket_keys.dependencies import SignersDep
from tessera.tickets import service
from tessera.tickets.schemas import TicketRead
from tessera.web.routes import project_router
from tessera.web.urls import public_base

router = project_router("/products", tags=["tickets"])


@router.get(
    "/{id}/items/{item_id}/ticket", response_model=TicketRead, responses=responses(400, 401, 404)
)
async def get_ticket(
    request: Request,
    principal: ReadAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    id: uuid.UUID,
    item_id: ItemKey,
) -> TicketRead:
    """The item's ticket: its `secret` (what the QR code holds, signed: a door checks it offline
    with the key from `GET /v1/checkins/sync`; `POST /v1/checkins` takes it)
    and its page's `url` (`TESSERA_PUBLIC_URL`, else this request's base URL, then
    `/tickets/{token}`; no credential needed there). `item_id` is the item's number within the
    product or its id. A transfer gives the new holder a new ticket."""
    return await service.get_ticket(
        database,
        principal,
        signers=signers,
        hash_key=settings.hash_key_bytes,
        base_url=public_base(settings, request),
        product_id=id,
        item=item_id,
    )


@router.post(
    "/{id}/items/{item_id}/ticket/reissue",
    response_model=TicketRead,
    responses=responses(400, 401, 403, 404),
)
async def reissue_ticket(
    request: Request,
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    id: uuid.UUID,
    item_id: ItemKey,
) -> TicketRead:
    """A new secret and page for the item (a lost phone, a resold ticket): the old ones stop
    working at once, at the door and on the page. Fires `ticket.reissued`. When the project
    emails tickets, the holder is emailed the new page."""
    return await service.reissue_ticket(
        database,
        principal,
        signers=signers,
        hash_key=settings.hash_key_bytes,
        base_url=public_base(settings, request),
        product_id=id,
        item=item_id,
        mail=for_request(request, principal, settings, signers),
    )
