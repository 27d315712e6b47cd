"""The API's reference for people: Swagger UI at ``/docs``.

Its script, stylesheet and icon are Swagger UI's release files as the fastapi-swagger package
ships them (pinned in pyproject.toml; only its files are used), served by Tessera itself under
``/docs/assets``. The page loads nothing from another site, so it works offline and tells no CDN
who reads it; its content security policy holds it to that.
"""

import hashlib
import re
from base64 import b64encode

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse

ASSETS = "/docs/assets"
# (package, folder): swagger-ui-bundle.js, swagger-ui.css and favicon-32x32.png, for StaticFiles.
SWAGGER_UI = ("fastapi_swagger", "resources")

router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def swagger_ui_html(request: Request) -> HTMLResponse:
    def here(name: str, **params: str) -> str:
        # A path on this server, behind whatever root path a proxy gives it.
        return request.url_for(name, **params).path

    def asset(file: str) -> str:
        return here("docs_assets", path=file)

    app = request.app
    page = get_swagger_ui_html(
        openapi_url=here("openapi"),
        title=f"{app.title} - Swagger UI",
        swagger_js_url=asset("swagger-ui-bundle.js"),
        swagger_css_url=asset("swagger-ui.css"),
        swagger_favicon_url=asset("favicon-32x32.png"),
        oauth2_redirect_url=here("swagger_ui_redirect"),
        init_oauth=app.swagger_ui_init_oauth,
        swagger_ui_parameters=app.swagger_ui_parameters,
    )
    return confined(page)


@router.get("/docs/oauth2-redirect")
async def swagger_ui_redirect() -> HTMLResponse:
    return confined(get_swagger_ui_oauth2_redirect_html())


# A script element without attributes: the page's own code, inline (a src= script has some).
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def confined(page: HTMLResponse) -> HTMLResponse:
    """The page runs its own inline scripts (Swagger UI's start, allowed by their hashes) and
    what the server serves, and connects to the server alone (the spec, "Try it out")."""
    scripts = " ".join(
        f"'sha256-{b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
        for script in INLINE_SCRIPT.findall(bytes(page.body).decode())
    )
    page.headers["Content-Security-Policy"] = (
        f"default-src 'none'; script-src 'self' {scripts}; style-src 'self'; "
        "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    )
    page.headers["X-Content-Type-Options"] = "nosniff"
    return page
