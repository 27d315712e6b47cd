"""Where people reach this server, for the links Tessera hands out (claim links, tickets)."""

from typing import Annotated

from fastapi import Depends
from starlette.requests import Request

from tessera.config import Settings, settings_of


def public_base(settings: Settings, request: Request) -> str:
    """``TESSERA_PUBLIC_URL``, else the request's own base URL (no trailing slash)."""
    return (settings.public_url or str(request.base_url)).rstrip("/")


async def public_url(request: Request) -> str:
    """``public_base`` as a dependency of the request alone: a project route that takes it
    stays plain (``tessera.web.handlers``)."""
    return public_base(await settings_of(request), request)


PublicUrlDep = Annotated[str, Depends(public_url)]
