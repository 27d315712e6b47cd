"""The claim page as a person uses it: a real browser (headless Chromium) on a real
``tessera serve``, on the suite's database. The keyboard only, the pages' own resources only, and
axe-core finds nothing serious or critical.

Screenshots go to artifacts/screenshots/ (not committed); the form page also to
docs/claim-page.png, the picture in docs/api.md (its content is fixed, so the file only changes when
the page's look does).
"""

import os
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, Response, expect

from tests.conftest import BACKEND
from tests.serving import ROOT, fresh_database, serve, settings_env, tessera

pytestmark = pytest.mark.browser

SCREENSHOTS = ROOT / "artifacts" / "screenshots"
PICTURE = ROOT / "docs" / "claim-page.png"
VIEWPORT = {"width": 800, "height": 900}


def at(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


# What the picture in docs/api.md shows: fixed, so that the picture is too.
FESTIVAL = {
    "name": "Harbour Lights Festival",
    "location": "Quay 4",
    "address": "Harbour Road 1, Rotterdam",
    "start_date": at("2031-06-13T18:00"),
    "end_date": at("2031-06-15T23:00"),
}
PASS = {
    "type": "admission",
    "name": "Weekend pass",
    "description": "Entry to every stage from Friday evening to Sunday night, for one person.",
}


@dataclass
class Server:
    url: str
    api_key: str

    def api(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"x-api-key": self.api_key})

    async def claim_link(
        self, *, event: dict[str, Any] | None = None, **link: Any
    ) -> dict[str, Any]:
        """A claimable Weekend pass (of ``event``, if given) and a link for it."""
        async with self.api() as api:
            product = PASS | {"is_claimable": True}
            if event is not None:
                created = await api.post("/v1/events/create", json=event)
                assert created.status_code == 201, created.text
                product["event_id"] = created.json()["id"]
            created = await api.post("/v1/products", json=product)
            assert created.status_code == 201, created.text
            answer = await api.post(f"/v1/products/{created.json()['id']}/claim-links", json=link)
            assert answer.status_code == 201, answer.text
            return answer.json()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    directory = tmp_path_factory.mktemp("browser")
    env = settings_env(
        fresh_database(BACKEND, directory, f"browser_{worker}"), worker_in_process=False
    )
    # The CLI creates the project while the server starts: a second or two less to wait.
    with ThreadPoolExecutor(1) as pool:
        created = pool.submit(tessera, "project", "create", "--name", "Harbour Lights", env=env)
        with serve(env, directory / "server.log") as url:
            yield Server(url, created.result()["api_key"])


@dataclass
class Person:
    """A tab in a browser context of its own, and everything it fetched or complained about."""

    page: Page
    requests: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    def listen(self) -> None:
        """Record what the tab fetches, what fails and what it complains about."""
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("response", self.saw)
        self.page.on("console", self.complained)
        self.page.on("pageerror", lambda error: self.console_errors.append(str(error)))

    def check_served_alone(self, server_url: str, stylesheet: str) -> None:
        """Every page loaded its stylesheet (and icon) from the server alone, and the browser
        found nothing to complain about: no CSP violation, no failed load, no script error."""
        home = urlsplit(server_url)
        assert self.requests, "no request recorded"
        elsewhere = [u for u in self.requests if urlsplit(u)[:2] != (home.scheme, home.netloc)]
        assert elsewhere == []
        assert any(url.endswith(stylesheet) for url in self.requests)
        assert self.failed == []
        assert self.console_errors == []

    def saw(self, response: Response) -> None:
        # A page's own 4xx is its answer; a stylesheet or icon that fails is a broken page (a
        # 304 is the browser's cached copy, still good).
        if response.request.resource_type != "document" and not (
            response.ok or response.status == 304
        ):
            self.failed.append(f"{response.status} {response.url}")

    def complained(self, message: ConsoleMessage) -> None:
        # Chromium logs every 4xx, the documents' too; the failed resources are in ``failed``.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.console_errors.append(message.text)


@pytest.fixture
async def person(browser: Browser, server: Server) -> AsyncIterator[Person]:
    context = await browser.new_context(viewport=VIEWPORT)
    visit = Person(await context.new_page())
    visit.listen()
    yield visit
    await context.close()
    visit.check_served_alone(server.url, "/static/tessera.css")


async def screenshot(page: Page, name: str) -> bytes:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return await page.screenshot(path=SCREENSHOTS / name)


async def submit_with_enter(page: Page, status: int) -> None:
    async with page.expect_response(lambda r: r.request.method == "POST") as posted:
        await page.keyboard.press("Enter")
    assert (await posted.value).status == status
    await page.wait_for_load_state()


async def test_a_person_claims_with_the_keyboard(person: Person, server: Server) -> None:
    link = await server.claim_link(
        event=FESTIVAL, max_claims=250, expires_at=at("2031-06-13T12:00")
    )
    page = person.page
    response = await page.goto(link["url"])
    assert response is not None and response.status == 200
    await expect(page).to_have_title("Claim Weekend pass · Tessera")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Weekend pass")
    await expect(page.get_by_role("heading", level=2)).to_have_text("Harbour Lights Festival")
    await expect(page.get_by_text("250 claims left")).to_be_visible()
    await expect(page.get_by_text("open until 13 June 2031, 12:00 UTC")).to_be_visible()
    email = page.get_by_label("Email address")
    first_name = page.get_by_label("First name")
    last_name = page.get_by_label("Last name")
    await expect(email).to_have_attribute("type", "email")
    await expect(email).to_have_attribute("autocomplete", "email")
    await expect(first_name).to_have_attribute("autocomplete", "given-name")
    await expect(last_name).to_have_attribute("autocomplete", "family-name")
    # The stylesheet applied: the CSP lets the page's own CSS in.
    button = page.get_by_role("button", name="Claim")
    await expect(button).to_have_css("background-color", "rgb(11, 92, 173)")
    picture = await screenshot(page, "claim-form.png")
    PICTURE.parent.mkdir(exist_ok=True)
    if not PICTURE.exists() or PICTURE.read_bytes() != picture:
        PICTURE.write_bytes(picture)

    # Keyboard only: the first Tab reaches the email field; Enter submits.
    await page.keyboard.press("Tab")
    await expect(email).to_be_focused()
    await page.keyboard.type("ada.example.com")
    await page.keyboard.press("Tab")
    await expect(first_name).to_be_focused()
    await page.keyboard.type("Ada")
    await page.keyboard.press("Tab")
    await page.keyboard.type("Lovelace")
    await submit_with_enter(page, 400)

    alert = page.get_by_role("alert")
    await expect(alert).to_be_visible()
    await expect(alert.get_by_role("heading")).to_have_text("Please check the form")
    await expect(alert).to_contain_text("Email address: value is not a valid email address")
    await expect(email).to_have_value("ada.example.com")
    await expect(email).to_have_attribute("aria-invalid", "true")
    await expect(first_name).to_have_value("Ada")
    await expect(last_name).to_have_value("Lovelace")
    await screenshot(page, "claim-form-error.png")
    # The field in error is the first stop of the keyboard, and is fixed in place.
    await page.keyboard.press("Tab")
    await expect(email).to_be_focused()
    await page.keyboard.press("ControlOrMeta+A")
    await page.keyboard.type("Ada@Example.com")
    await submit_with_enter(page, 201)

    await expect(page).to_have_title("You have claimed Weekend pass · Tessera")
    result = page.get_by_role("status")
    await expect(result.get_by_role("heading", level=1)).to_have_text(
        "You have claimed Weekend pass"
    )
    await expect(result).to_contain_text("Item #1 is held for ada@example.com.")
    await expect(page.locator("form")).to_have_count(0)
    await screenshot(page, "claim-result.png")

    async with server.api() as api:
        now = await api.get(f"/v1/products/{link['product_id']}/claim-links/{link['id']}")
        assert now.json()["claims"] == 1
        user = await api.post("/v1/users/profile", json={"email": "ada@example.com"})
        assert (user.json()["firstName"], user.json()["isActivated"]) == ("Ada", True)


async def test_an_unknown_link(person: Person, server: Server) -> None:
    page = person.page
    response = await page.goto(f"{server.url}/claim/tcl_not-a-real-token")
    assert response is not None and response.status == 404
    await expect(page).to_have_title("This claim link does not exist · Tessera")
    await expect(page.get_by_role("heading", level=1)).to_have_text(
        "This claim link does not exist"
    )
    await expect(page.get_by_role("alert")).to_contain_text(
        "Check that the address is complete, or ask for a new link."
    )
    await expect(page.locator("form")).to_have_count(0)
    await screenshot(page, "claim-not-found.png")


async def test_a_link_used_up_while_the_page_was_open(person: Person, server: Server) -> None:
    link = await server.claim_link(max_claims=1)
    page = person.page
    await page.goto(link["url"])
    await expect(page.get_by_text("1 claim left")).to_be_visible()
    # Someone else claims the last item first.
    async with server.api() as api:
        taken = await api.post(f"/v1/claims/{link['token']}", json={"email": "quick@example.com"})
        assert taken.status_code == 201
    await page.get_by_label("Email address").fill("slow@example.com")
    async with page.expect_response(lambda r: r.request.method == "POST") as posted:
        await page.get_by_role("button", name="Claim").click()
    assert (await posted.value).status == 410
    reason = "This claim link is used up: every claim it allows was made."
    await expect(page.get_by_role("heading", level=1)).to_have_text(
        "This claim link can no longer be used"
    )
    await expect(page.get_by_role("alert")).to_contain_text(reason)
    await screenshot(page, "claim-used-up.png")
    # Opening the link again shows the same reason, and no form.
    response = await page.goto(link["url"])
    assert response is not None and response.status == 410
    await expect(page.get_by_role("alert")).to_contain_text(reason)
    await expect(page.locator("form")).to_have_count(0)


async def serious_violations(page: Page, axe_script: Path) -> list[str]:
    await page.add_script_tag(path=axe_script)
    result = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']]}"
        for v in result["violations"]
        if v["impact"] in {"serious", "critical"}
    ]


async def test_axe_finds_nothing_serious(
    browser: Browser, server: Server, axe_script: Path
) -> None:
    # axe is injected as an inline script, which the pages' CSP forbids: this context alone
    # sets the CSP aside (the other tests run under it).
    context = await browser.new_context(viewport=VIEWPORT, bypass_csp=True)
    page = await context.new_page()
    link = await server.claim_link(event=FESTIVAL, max_claims=1)
    found: dict[str, list[str]] = {}
    try:
        await page.goto(link["url"])
        found["form"] = await serious_violations(page, axe_script)
        await page.get_by_label("Email address").fill("not an address")
        await page.get_by_role("button", name="Claim").click()
        await expect(page.get_by_role("alert")).to_be_visible()
        found["form with an error"] = await serious_violations(page, axe_script)
        await page.get_by_label("Email address").fill("grace@example.com")
        await page.get_by_role("button", name="Claim").click()
        await expect(page.get_by_role("status")).to_be_visible()
        found["result"] = await serious_violations(page, axe_script)
        await page.goto(link["url"])
        await expect(page.get_by_role("alert")).to_be_visible()
        found["used up"] = await serious_violations(page, axe_script)
        await page.goto(f"{server.url}/claim/tcl_unknown")
        found["not found"] = await serious_violations(page, axe_script)
    finally:
        await context.close()
    assert found == {name: [] for name in found}
    assert len(found) == 5
