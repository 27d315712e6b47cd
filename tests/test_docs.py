"""/docs: Swagger UI with every file it loads served by Tessera, never a CDN's
(tests/browser/test_docs.py renders it with the network cut)."""

import hashlib
import re
from base64 import b64encode
from html.parser import HTMLParser

import httpx
import pytest

# name: (content types, at least so many bytes); .js gets its type from the system's mime.types.
ASSETS = {
    "swagger-ui-bundle.js": ({"text/javascript", "application/javascript"}, 500_000),
    "swagger-ui.css": ({"text/css"}, 50_000),
    "favicon-32x32.png": ({"image/png"}, 100),
}


class Links(HTMLParser):
    """Every URL a page loads (src, href) and the text of its inline scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: dict[str, str] = {}
        self.inline: list[str] = []
        self._in_inline = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value for name, value in attrs if name in {"src", "href"}}
        self.urls |= {value: tag for value in found.values() if value is not None}
        self._in_inline = tag == "script" and not found
        if self._in_inline:
            self.inline.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_inline = False

    def handle_data(self, data: str) -> None:
        if self._in_inline:
            self.inline[-1] += data


def read(html: str) -> Links:
    links = Links()
    links.feed(html)
    return links


def csp_hash(script: str) -> str:
    return f"'sha256-{b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"


def directives(response) -> dict[str, list[str]]:
    policy = response.headers["content-security-policy"]
    return {name: values for name, *values in (d.split() for d in policy.split(";") if d.strip())}


class TestDocs:
    async def test_swagger_ui_loads_only_from_the_server(self, client):
        response = await client.get("/docs")
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert "<title>Tessera Wallet API - Swagger UI</title>" in response.text
        links = read(response.text)
        assert set(links.urls) == {f"/docs/assets/{name}" for name in ASSETS}
        assert all(url.startswith("/") and not url.startswith("//") for url in links.urls)
        assert "url: '/openapi.json'" in response.text
        assert "oauth2RedirectUrl: window.location.origin + '/docs/oauth2-redirect'" in (
            response.text
        )
        assert "://" not in response.text

    async def test_behind_a_proxy_the_paths_keep_its_prefix(self, app):
        # What the ASGI server gives an app mounted under a prefix (uvicorn --root-path).
        transport = httpx.ASGITransport(app=app, root_path="/tessera")
        async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
            response = await http.get("/docs")
        links = read(response.text)
        assert set(links.urls) == {f"/tessera/docs/assets/{name}" for name in ASSETS}
        assert "url: '/tessera/openapi.json'" in response.text

    async def test_the_policy_lets_in_its_own_scripts_alone(self, client):
        response = await client.get("/docs")
        policy = directives(response)
        (start,) = read(response.text).inline
        assert "SwaggerUIBundle(" in start
        assert policy == {
            "default-src": ["'none'"],
            "script-src": ["'self'", csp_hash(start)],
            "style-src": ["'self'"],
            "img-src": ["'self'", "data:"],  # the stylesheet's icons
            "connect-src": ["'self'"],
            "form-action": ["'self'"],
            "base-uri": ["'none'"],
            "frame-ancestors": ["'none'"],
        }
        assert response.headers["x-content-type-options"] == "nosniff"

    async def test_the_spec_it_shows(self, client):
        response = await client.get("/openapi.json")
        assert response.status_code == 200
        assert response.json()["info"]["title"] == "Tessera Wallet API"


class TestDocsAssets:
    @pytest.mark.parametrize("name", ASSETS)
    async def test_served_from_the_package(self, client, name):
        content_types, at_least = ASSETS[name]
        response = await client.get(f"/docs/assets/{name}")
        assert response.status_code == 200
        assert response.headers["content-type"].split(";")[0] in content_types
        assert len(response.content) >= at_least

    async def test_the_bundle_is_swagger_ui_5(self, client):
        bundle = (await client.get("/docs/assets/swagger-ui-bundle.js")).text
        (version,) = set(re.findall(r'PACKAGE_VERSION:"(\d+\.\d+\.\d+)"', bundle))
        assert version.startswith("5.")  # 4.x cannot show an OpenAPI 3.1 document

    async def test_an_unknown_file(self, client):
        response = await client.get("/docs/assets/missing.js")
        assert response.status_code == 404
        assert response.json() == {"message": "nothing answers GET /docs/assets/missing.js"}


class TestOAuth2Redirect:
    async def test_its_page_under_the_same_policy(self, client):
        response = await client.get("/docs/oauth2-redirect")
        assert response.status_code == 200
        links = read(response.text)
        assert links.urls == {}
        (script,) = links.inline
        assert directives(response)["script-src"] == ["'self'", csp_hash(script)]
