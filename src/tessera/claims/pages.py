"""The claim page, for people rather than programs: ``GET /claim/{token}`` shows what the link
offers and a form; posting the form claims. Plain HTML that works without JavaScript, styled by
one stylesheet served from the package (no CDN, no external font). Every outcome of the claim
API has its page: the item claimed, or the reason it was not (with the API's status code)."""

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse
from pydantic import StringConstraints, ValidationError

from tessera.claims import service
from tessera.claims.dependencies import ClaimLimiterDep
from tessera.claims.router import admit_claim
from tessera.claims.schemas import ClaimRequest
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import (
    AppError,
    ClaimLinkClosed,
    ClaimLinkNotFound,
    ClaimNotForYou,
    ProductOutOfStock,
    TooManyClaims,
    validation_messages,
)
from tessera.mail.service import ticket_mail
from tessera.schemas import Input
from tessera.ticket_keys.dependencies import SignersDep
from tessera.toolkit.crypto import BoxDep
from tessera.web.pages import page
from tessera.web.urls import public_base

# What a person reads for each refusal; the API's message follows as the detail.
HEADINGS: list[tuple[type[AppError], str]] = [
    (ClaimLinkNotFound, "This claim link does not exist"),
    (ClaimLinkClosed, "This claim link can no longer be used"),
    (ClaimNotForYou, "This link is for someone else"),
    (ProductOutOfStock, "Out of stock"),
    (TooManyClaims, "Too many attempts"),
]

router = APIRouter(include_in_schema=False)


class ClaimForm(Input):
    """The page's form as posted: text kept as typed (shown again with an error), checked as a
    ``ClaimRequest``."""

    email: Annotated[str, StringConstraints(max_length=1000)] = ""
    first_name: Annotated[str, StringConstraints(max_length=1000)] = ""
    last_name: Annotated[str, StringConstraints(max_length=1000)] = ""


def _refusal(request: Request, error: AppError) -> HTMLResponse:
    heading = next(
        (h for kind, h in HEADINGS if isinstance(error, kind)), "This item cannot be claimed"
    )
    lines = [error.message[:1].upper() + error.message[1:] + "."]
    if isinstance(error, ClaimLinkNotFound):
        lines = ["Check that the address is complete, or ask for a new link."]
    response = page(
        request,
        "claim_result.html",
        {
            "ok": False,
            "heading": heading,
            "lines": lines,
            "retry": isinstance(error, TooManyClaims),
            "ticket_urls": [],
        },
        error.status_code,
    )
    response.headers.update(error.headers() or {})
    return response


@router.get("/claim/{token}", response_class=HTMLResponse)
async def claimpage(
    request: Request, database: DatabaseDep, settings: SettingsDep, token: str
) -> HTMLResponse:
    try:
        offer = await service.view_offer(database, token=token, hash_key=settings.hash_key_bytes)
    except AppError as error:
        return _refusal(request, error)
    form = {"email": "", "first_name": "", "last_name": ""}
    return page(request, "claim.html", {"offer": offer, "form": form, "errors": []}, 200)


@router.post("/claim/{token}", response_class=HTMLResponse)
async def claim_frompage(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    box: BoxDep,
    signers: SignersDep,
    limiter: ClaimLimiterDep,
    token: str,
    form: Annotated[ClaimForm, Form()],
) -> HTMLResponse:
    try:
        await admit_claim(request, database, limiter, token)
        try:
            body = ClaimRequest(
                email=form.email.strip(),
                first_name=form.first_name.strip() or None,
                last_name=form.last_name.strip() or None,
            )
        except ValidationError as invalid:
            offer = await service.view_offer(
                database, token=token, hash_key=settings.hash_key_bytes
            )
            errors = [_readable(line) for line in validation_messages(invalid.errors())]
            return page(
                request, "claim.html", {"offer": offer, "form": form, "errors": errors}, 400
            )
        user_id, items, new = await service.claim(
            database,
            token=token,
            body=body,
            settings=settings,
            box=box,
            mail=ticket_mail(settings, signers, public_base(settings, request)),
        )
    except AppError as error:
        return _refusal(request, error)
    answer = service.claim_answer(
        user_id,
        items,
        new,
        hash_key=settings.hash_key_bytes,
        base_url=public_base(settings, request),
    )
    product = items[0].product
    heading = f"You have claimed {product.name}" if new else f"You already claimed {product.name}"
    if len(items) == 1:
        lines = [
            f"Item #{items[0].row.item_id} is held for {body.email}.",
            "It was claimed through this link before; this is the same item."
            if not new
            else "Your ticket is ready: open it now and keep its page, it is what you show at "
            "the door.",
        ]
    else:
        numbers = ", ".join(f"#{item.row.item_id}" for item in items)
        lines = [
            f"Items {numbers} are held for {body.email}.",
            "They were claimed through this link before; these are the same items."
            if not new
            else "Your tickets are ready: open each now and keep its page, it is what you show "
            "at the door.",
        ]
    return page(
        request,
        "claim_result.html",
        {
            "ok": True,
            "heading": heading,
            "lines": lines,
            "retry": False,
            "ticket_urls": answer.ticket_urls or [],
        },
        201 if new else 200,
    )


def _readable(line: str) -> str:
    """``email: value is not a valid email address: ...`` as a person reads it. The request is
    built from the form by field name, so errors name the fields as the form does."""
    field, _, why = line.partition(": ")
    names = {"email": "Email address", "first_name": "First name", "last_name": "Last name"}
    return f"{names.get(field, field)}: {why}" if why else line
