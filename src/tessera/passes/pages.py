"""A ticket's phone wallets, beside its page (``tessera.tickets.pages``):
``GET /tickets/{token}/pass.pkpass`` is its Apple Wallet pass, and
``GET /tickets/{token}/google-wallet`` leads to Google Wallet's save page with it. The token is
the credential, as the page's is; a token the page refuses gets the page's 404, and a wallet
the server is not configured for a 404 naming its settings."""

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.passes import service as passes
from tessera.passes.dependencies import WalletsDep
from tessera.passes.router import pass_response
from tessera.ticket_keys.dependencies import SignersDep
from tessera.tickets.pages import NOT_VALID, missing, ticket_of_token
from tessera.web.pages import HEADERS
from tessera.web.urls import public_base

router = APIRouter(include_in_schema=False)

NO_APPLE_WALLET = ("Apple Wallet passes are not set up here", [passes.APPLE_MISSING + "."])
NO_GOOGLE_WALLET = ("Google Wallet is not set up here", [passes.GOOGLE_MISSING + "."])


@router.get("/tickets/{token}/pass.pkpass", response_model=None)
async def ticket_apple_pass(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    wallets: WalletsDep,
    token: str,
) -> Response:
    if wallets.apple is None:
        return missing(request, *NO_APPLE_WALLET)
    ticket = await database.read(ticket_of_token, token, settings.hash_key_bytes)
    if ticket is None:
        return missing(request, *NOT_VALID)
    found = await passes.ticket_pass(
        database,
        wallets.apple,
        signers,
        hash_key=settings.hash_key_bytes,
        base_url=public_base(settings, request),
        item=ticket.item,
        shown=ticket.shown,
    )
    response = pass_response(found, filename="ticket.pkpass")
    response.headers.update(HEADERS)
    return response


@router.get("/tickets/{token}/google-wallet", response_model=None)
async def ticket_google_wallet(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    wallets: WalletsDep,
    token: str,
) -> Response:
    """A redirect to Google Wallet's save page with the ticket's link, signed as it is
    asked for (so that a link in an old email never carries a stale secret)."""
    if wallets.google is None:
        return missing(request, *NO_GOOGLE_WALLET)
    ticket = await database.read(ticket_of_token, token, settings.hash_key_bytes)
    if ticket is None:
        return missing(request, *NOT_VALID)
    link = await passes.google_link(
        database, wallets.google, signers, item=ticket.item, shown=ticket.shown
    )
    return RedirectResponse(link, status_code=303, headers=HEADERS)
