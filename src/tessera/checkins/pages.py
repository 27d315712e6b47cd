"""The offline door scanner: ``GET /scan``, a page that checks tickets in with or without a
network (docs/scanner.md), and ``GET /scan/sw.js``, its service worker.

The page is a shell: no data of the server's is in it, so it needs no credential. What it works
with it fetches from the check-in API (``/v1/checkins/...``) with the API key a person types in
once, and keeps in the browser. Its script and styles are static files
(``static/scan/``), served from the package like the other pages' (no CDN); its CSP lets it talk
to this server alone, and use the camera (``Permissions-Policy``) for QR codes.

The service worker is served here rather than from /static so that it may control /scan
(``Service-Worker-Allowed``), with the digest of the page and its assets written into it: any
change to them is a new worker, which the browser installs, and which caches them afresh.
"""

import hashlib
from functools import cache

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from tessera.web.pages import HEADERS, PACKAGE, templates

router = APIRouter(include_in_schema=False)

ASSETS = PACKAGE / "static" / "scan"
WORKER = ASSETS / "sw.js"

PAGE_HEADERS = HEADERS | {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data: blob:; connect-src 'self'; worker-src 'self'; manifest-src 'self'; "
    "media-src 'self' blob:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "Permissions-Policy": "camera=(self)",
}
WORKER_HEADERS = {
    "Service-Worker-Allowed": "/scan",
    "X-Content-Type-Options": "nosniff",
    # The browser asks again each time it checks for an update: a new digest takes effect then.
    "Cache-Control": "no-cache",
}


@cache
def version() -> str:
    """A digest of everything the service worker caches (the page's template, its assets and
    the shared stylesheet and icon): it changes when any of them does."""
    digest = hashlib.sha256()
    files = [
        PACKAGE / "templates" / "scan.html",
        PACKAGE / "static" / "tessera.css",
        PACKAGE / "static" / "favicon.svg",
        *sorted(p for p in ASSETS.rglob("*") if p.is_file()),
    ]
    for path in files:
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@cache
def worker_script() -> str:
    return WORKER.read_text(encoding="utf-8").replace("__VERSION__", version())


@router.get("/scan", response_class=HTMLResponse)
async def scan_page(request: Request) -> HTMLResponse:
    return templates.TemplateResponse(request, "scan.html", {}, headers=PAGE_HEADERS)


@router.get("/scan/sw.js")
async def scan_worker() -> Response:
    return Response(worker_script(), media_type="text/javascript", headers=WORKER_HEADERS)
