"""Claim links of a product (project credentials), and the public claim API (no credential)."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.claims import service
from tessera.claims.dependencies import ClaimLimiterDep
from tessera.claims.schemas import (
    ClaimLinkCreate,
    ClaimLinkCreated,
    ClaimLinkList,
    ClaimLinkRead,
    ClaimRequest,
    ClaimResult,
    ClaimView,
)
from tessera.config import SettingsDep, settings_of
from tessera.db import DatabaseDep, get_database
from tessera.errors import responses
from tessera.idempotency.schemas import KeyScope
from tessera.mail.service import ticket_mail
from tessera.schemas import PageParams, known_query_only
from tessera.ticket_keys.dependencies import SignersDep
from tessera.toolkit.crypto import BoxDep
from tessera.web.routes import IdempotentRoute, project_router
from tessera.web.urls import PublicUrlDep


async def admit_claim(
    request: Request, database: DatabaseDep, limiter: ClaimLimiterDep, token: str
) -> None:
    """The rate limits of claims (``claims.limiter``), before anything else is done."""
    address = request.client.host if request.client else "unknown"
    await limiter.admit(database, address=address, link=token)


router = project_router("/products/{id}/claim-links", tags=["claims"])


@router.post(
    "",
    status_code=201,
    response_model=ClaimLinkCreated,
    responses=responses(400, 401, 403, 404, 409),
)
async def create_claim_link(
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    base_url: PublicUrlDep,
    id: uuid.UUID,
    body: ClaimLinkCreate,
) -> ClaimLinkCreated:
    """A link through which people claim items of an ``is_claimable`` product (409 otherwise).
    Its ``token`` and ``url`` are shown in this answer only, and with ``send_email`` in an
    invitation emailed to the link's ``email``."""
    return await service.create_link(
        database,
        principal,
        product_id=id,
        body=body,
        hash_key=settings.hash_key_bytes,
        base_url=base_url,
        mail=ticket_mail(settings, signers, base_url),
    )


@router.get("", response_model=ClaimLinkList, responses=responses(400, 401, 404))
async def list_claim_links(
    principal: ReadAccess,
    database: DatabaseDep,
    id: uuid.UUID,
    paging: Annotated[PageParams, Query()],
) -> ClaimLinkList:
    """The product's claim links, oldest first, each with the ``claims`` made through it."""
    return await service.list_links(database, principal, product_id=id, paging=paging)


@router.get("/{link_id}", response_model=ClaimLinkRead, responses=responses(400, 401, 404))
async def get_claim_link(
    principal: ReadAccess, database: DatabaseDep, id: uuid.UUID, link_id: uuid.UUID
) -> ClaimLinkRead:
    """One claim link of the product."""
    return await service.get_link(database, principal, product_id=id, link_id=link_id)


@router.delete("/{link_id}", response_model=ClaimLinkRead, responses=responses(400, 401, 403, 404))
async def revoke_claim_link(
    principal: WriteAccess, database: DatabaseDep, id: uuid.UUID, link_id: uuid.UUID
) -> ClaimLinkRead:
    """Revoke a claim link: its token answers 404 from now on (revoking again changes nothing).
    Items already claimed stay with their owners."""
    return await service.revoke_link(database, principal, product_id=id, link_id=link_id)


class ClaimRoute(IdempotentRoute):
    """A public claim keeps its Idempotency-Keys within its claim link."""

    async def key_scope(self, request: Request) -> KeyScope | None:
        # Looked up before the route's dependencies run: their providers, called directly.
        settings = await settings_of(request)
        return await service.key_scope(
            await get_database(request),
            token=request.path_params["token"],
            hash_key=settings.hash_key_bytes,
        )


public_router = APIRouter(
    prefix="/v1/claims",
    tags=["claims"],
    dependencies=[Depends(known_query_only)],
    route_class=ClaimRoute,
)


@public_router.get("/{token}", response_model=ClaimView, responses=responses(404, 410))
async def view_claim(database: DatabaseDep, settings: SettingsDep, token: str) -> ClaimView:
    """What a claim link offers (no credential): the product, its event, the claims left and
    the expiry. 404 for an unknown or revoked token, 410 for an expired or used-up link."""
    return await service.view_offer(database, token=token, hash_key=settings.hash_key_bytes)


@public_router.post(
    "/{token}",
    status_code=201,
    response_model=ClaimResult,
    responses={
        200: {
            "model": ClaimResult,
            "description": "This email claimed through this link "
            "before: its first item, not a second one.",
        },
        **responses(400, 403, 404, 409, 410, 429),
    },
    dependencies=[Depends(admit_claim)],
)
async def claim_item(
    database: DatabaseDep,
    settings: SettingsDep,
    box: BoxDep,
    signers: SignersDep,
    base_url: PublicUrlDep,
    response: Response,
    token: str,
    body: ClaimRequest,
) -> ClaimResult:
    """Claim through a link (no credential): one item, or a waiting list offer's quantity. The
    user is found by email in the link's project, or created with a custodial wallet and
    activated; the items are issued by the issuing rules. Rate-limited per client address and
    per link (429 with Retry-After). A new claim's answer has the `ticket_urls` of the items'
    ticket pages. When the project emails tickets, the claimant is emailed them too."""
    user_id, items, new = await service.claim(
        database,
        token=token,
        body=body,
        settings=settings,
        box=box,
        mail=ticket_mail(settings, signers, base_url),
    )
    if not new:
        response.status_code = 200
    return service.claim_answer(
        user_id, items, new, hash_key=settings.hash_key_bytes, base_url=base_url
    )
