"""What the public pages share (the claim page, the ticket page): their templates, with the
date filters, and their headers. A page's URL carries a token: no page may hand it to another
site (Referer), load anything from elsewhere, or be framed, and none is cached."""

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

PACKAGE = Path(__file__).resolve().parents[1]  # tessera/: its templates/ and static/
templates = Jinja2Templates(directory=PACKAGE / "templates")
templates.env.filters["date"] = lambda ts: datetime.fromtimestamp(ts, UTC).strftime(
    "%d %B %Y, %H:%M UTC"
)
templates.env.filters["isodate"] = lambda ts: datetime.fromtimestamp(ts, UTC).isoformat()

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """The template ``name`` rendered with ``context``, with the pages' headers."""
    return templates.TemplateResponse(request, name, context, status_code=status, headers=HEADERS)
