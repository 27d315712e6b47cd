"""Where people reach this server, for the links Tessera hands out (claim links, tickets)."""

from starlette.requests import Request


def public_base(request: Request) -> str:
    """``TESSERA_PUBLIC_URL``, else the request's own base URL (no trailing slash)."""
    configured: str | None = request.app.state.settings.public_url
    return (configured or str(request.base_url)).rstrip("/")
