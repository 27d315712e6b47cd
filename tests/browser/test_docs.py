"""/docs as a person uses it, with no network but the server: a real browser (headless Chromium)
on a real ``tessera serve``. Every request for another host is aborted and counted; Swagger UI
must render every tag and operation, and "Try it out" must reach the server, under the page's
content security policy.

The screenshot goes to artifacts/screenshots/docs.png (not committed).
"""

import os
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.async_api import Browser, ConsoleMessage, Response, Route, expect

from tests.conftest import BACKEND
from tests.serving import ROOT, fresh_database, serve, settings_env

pytestmark = pytest.mark.browser

SCREENSHOTS = ROOT / "artifacts" / "screenshots"
VIEWPORT = {"width": 1280, "height": 900}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    directory = tmp_path_factory.mktemp("docs")
    env = settings_env(
        fresh_database(BACKEND, directory, f"docs_{worker}"), worker_in_process=False
    )
    with serve(env, directory / "server.log") as url:
        yield url


def tags_and_operations(server: str) -> tuple[set[str], int]:
    spec = httpx.get(f"{server}/openapi.json", timeout=30).json()
    # The paths' operations and what Tessera sends (OpenAPI webhooks), each one block.
    documented = [*spec["paths"].values(), *spec.get("webhooks", {}).values()]
    operations = [operation for path in documented for operation in path.values()]
    return {tag for operation in operations for tag in operation["tags"]}, len(operations)


async def test_the_docs_work_offline(browser: Browser, server: str) -> None:
    home = urlsplit(server)
    elsewhere: list[str] = []
    failed: list[str] = []
    errors: list[str] = []

    async def offline(route: Route) -> None:
        if urlsplit(route.request.url)[:2] == (home.scheme, home.netloc):
            await route.continue_()
        else:
            elsewhere.append(route.request.url)
            await route.abort("internetdisconnected")

    def saw(response: Response) -> None:
        if not response.ok:
            failed.append(f"{response.status} {response.url}")

    def complained(message: ConsoleMessage) -> None:
        # A CSP violation is logged as an error; so is a script's own failure.
        if message.type == "error":
            errors.append(message.text)

    context = await browser.new_context(viewport=VIEWPORT)
    await context.route("**/*", offline)
    page = await context.new_page()
    page.on("response", saw)
    page.on("console", complained)
    page.on("pageerror", lambda error: errors.append(str(error)))
    tags, operations = tags_and_operations(server)
    try:
        response = await page.goto(f"{server}/docs", wait_until="networkidle")
        assert response is not None and response.status == 200
        assert (elsewhere, errors) == ([], [])  # nothing asked of another host, nothing refused
        await expect(page).to_have_title("Tessera Wallet API - Swagger UI")
        # Swagger UI builds the page from the spec: give a busy machine time for it.
        title = page.locator(".info .title")
        await expect(title).to_contain_text("Tessera Wallet API", timeout=30_000)
        # Every tag is a section, every operation a block in it.
        await expect(page.locator(".opblock-tag")).to_have_count(len(tags))
        shown = {
            text.strip() for text in await page.locator(".opblock-tag a span").all_inner_texts()
        }
        assert shown == tags
        await expect(page.locator(".opblock")).to_have_count(operations)
        create = page.locator("#operations-users-create_users_v1_users_create_post")
        await expect(create.locator(".opblock-summary-method")).to_have_text("POST")
        await expect(create.locator(".opblock-summary-path")).to_have_text("/v1/users/create")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=SCREENSHOTS / "docs.png")

        # "Try it out" on the open health check: Swagger UI's request reaches the server.
        version = page.locator("#operations-version-get_version_v1_version_get")
        await version.locator(".opblock-summary").click()
        await version.get_by_role("button", name="Try it out").click()
        async with page.expect_response(lambda r: r.url == f"{server}/v1/version") as answer:
            await version.get_by_role("button", name="Execute").click()
        assert (await answer.value).status == 200
        live = version.locator(".live-responses-table tbody")
        await expect(live.locator(".response-col_status")).to_have_text("200")
    finally:
        await context.close()
    assert elsewhere == []
    assert failed == []
    assert errors == []
