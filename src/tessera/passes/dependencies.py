"""The server's phone wallets (``service.Wallets``, loaded at start-up) and the token a wallet
pass's device shows, as dependencies."""

from typing import Annotated

from fastapi import Depends, Header, Request

from tessera.passes.service import Wallets


async def wallets_of(request: Request) -> Wallets:
    wallets: Wallets = request.app.state.wallets
    return wallets


async def pass_token(authorization: Annotated[str | None, Header()] = None) -> str:
    """The token of ``Authorization: ApplePass <token>``; "" without one (refused as a wrong
    one is)."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme == "ApplePass" else ""


WalletsDep = Annotated[Wallets, Depends(wallets_of)]
PassTokenDep = Annotated[str, Depends(pass_token)]
