import uuid
from typing import Annotated

from fastapi import Query

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.waiting import service
from tessera.waiting.schemas import EntryCreate, EntryFilter, EntryList, EntryRead
from tessera.web.routes import project_router
from tessera.web.urls import PublicUrlDep

router = project_router("/products/{id}/waiting-list", tags=["waiting list"])


@router.post(
    "", status_code=201, response_model=EntryRead, responses=responses(400, 401, 403, 404, 409)
)
async def join_waiting_list(
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    base_url: PublicUrlDep,
    id: uuid.UUID,
    body: EntryCreate,
) -> EntryRead:
    """Put a person in the product's line for ``quantity`` tickets (1-10): their ``position``
    and ``"status": "waiting"``. One live entry per email and product (409); a product with
    that much free for sale is not sold out (409); offers are emailed, so the server must send
    email (409). When stock comes back, the first entries it can serve are emailed an offer: a
    claim link bound to their email for their quantity, kept for them for the product's
    ``waiting_list_offer_seconds`` (default a day)."""
    return await service.join(
        database,
        principal,
        product_id=id,
        body=body,
        hash_key=settings.hash_key_bytes,
        base_url=base_url,
        sends_mail=settings.smtp_url is not None,
    )


@router.get("", response_model=EntryList, responses=responses(400, 401, 404))
async def list_waiting_list(
    principal: ReadAccess,
    database: DatabaseDep,
    id: uuid.UUID,
    query: Annotated[EntryFilter, Query()],
) -> EntryList:
    """The product's entries in line order, each with its ``status`` (``waiting``,
    ``offered``, ``claimed``, ``expired`` or ``removed``) and, while in line, its
    ``position``."""
    return await service.list_entries(database, principal, product_id=id, query=query)


@router.delete(
    "/{entry_id}", response_model=EntryRead, responses=responses(400, 401, 403, 404, 409)
)
async def remove_from_waiting_list(
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    id: uuid.UUID,
    entry_id: uuid.UUID,
) -> EntryRead:
    """Take an entry off the list (``"status": "removed"``; again: no change). An open offer
    is withdrawn (its link answers 404) and goes to the next in line; an entry claimed or
    expired is out of line already (409)."""
    return await service.remove(
        database, principal, product_id=id, entry_id=entry_id, hash_key=settings.hash_key_bytes
    )
