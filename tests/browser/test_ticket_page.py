"""The ticket page on a phone: a real browser (headless Chromium, 360 CSS pixels wide) on a real
``tessera serve``. A person claims an item, follows the result page's link to the ticket, and
what the browser draws of its QR code decodes (ZXing, from a screenshot) to the ticket's secret.
The page's own resources only, no CSP complaint, and axe-core finds nothing serious or critical.

Screenshots go to artifacts/screenshots/ (not committed); ticket-page.png is docs/tickets.md's
picture of a ticket page (its code differs each run: a fresh secret).
"""

import asyncio
import io
import os
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import zxingcpp
from icalendar import Calendar
from PIL import Image
from playwright.async_api import Browser, Page, expect

from tests.browser.test_claim_page import (
    FESTIVAL,
    PASS,
    Person,
    Server,
    screenshot,
    serious_violations,
)
from tests.conftest import BACKEND
from tests.serving import fresh_database, serve, settings_env, tessera

pytestmark = pytest.mark.browser

# A phone held upright; two device pixels to a CSS pixel, as most phones draw.
PHONE: dict[str, Any] = {"viewport": {"width": 360, "height": 740}, "device_scale_factor": 2}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    directory = tmp_path_factory.mktemp("browser_tickets")
    env = settings_env(
        fresh_database(BACKEND, directory, f"browser_tickets_{worker}"), worker_in_process=False
    )
    with ThreadPoolExecutor(1) as pool:
        created = pool.submit(tessera, "project", "create", "--name", "Harbour Lights", env=env)
        with serve(env, directory / "server.log") as url:
            yield Server(url, created.result()["api_key"])


@pytest.fixture
async def person(browser: Browser, server: Server) -> AsyncIterator[Person]:
    context = await browser.new_context(**PHONE, accept_downloads=True)
    visit = Person(await context.new_page())
    visit.listen()
    yield visit
    await context.close()
    visit.check_served_alone(server.url, "/static/tessera.css")


async def ticket_of(server: Server, product_id: str, item_id: int = 1) -> dict[str, Any]:
    async with server.api() as api:
        answer = await api.get(f"/v1/products/{product_id}/items/{item_id}/ticket")
        assert answer.status_code == 200, answer.text
        return answer.json()


def decoded(png: bytes) -> list[str]:
    picture = Image.open(io.BytesIO(png))
    return [code.text for code in zxingcpp.read_barcodes(picture, formats=zxingcpp.QRCode)]


async def fits_the_screen(page: Page) -> None:
    """Nothing wider than the screen: no sideways scrolling on a phone."""
    widths = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1] == 360, widths


async def test_a_claimed_ticket_on_a_phone(person: Person, server: Server) -> None:
    link = await server.claim_link(event=FESTIVAL, max_claims=10)
    page = person.page
    await page.goto(link["url"])
    await page.get_by_label("Email address").fill("ada@example.com")
    await page.get_by_label("First name").fill("Ada")
    await page.get_by_label("Last name").fill("Lovelace")
    await page.get_by_role("button", name="Claim").click()
    await expect(page.get_by_role("status")).to_contain_text("Item #1 is held for ada@example.com")
    await page.get_by_role("link", name="Open your ticket").click()
    await page.wait_for_load_state()
    ticket = await ticket_of(server, link["product_id"])
    assert page.url == ticket["url"]

    await expect(page).to_have_title("Ticket: Weekend pass · Tessera")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Weekend pass")
    await expect(page.locator("#state")).to_have_text("Valid")
    # The stylesheet applied (the CSP lets the page's own CSS in): the state's green edge.
    await expect(page.locator("#state")).to_have_css("border-left-color", "rgb(15, 107, 58)")
    await expect(page.locator("#holder")).to_have_text("Ada Lovelace")
    await expect(page.locator("#item")).to_have_text("#1")
    await expect(page.get_by_role("heading", level=2)).to_have_text("Harbour Lights Festival")
    await expect(page.get_by_text("13 June 2031, 18:00 UTC")).to_be_visible()
    await expect(page.locator("#secret")).to_have_text(ticket["secret"])

    # The code: at least 280 CSS pixels wide, on the screen, and it decodes to the secret.
    code = page.get_by_role("img", name="QR code of this ticket's secret")
    await expect(code).to_be_visible()
    box = await code.locator("svg").bounding_box()
    assert box is not None
    assert box["width"] >= 280 and box["x"] >= 0 and box["x"] + box["width"] <= 360, box
    assert abs(box["width"] - box["height"]) < 1, box
    await fits_the_screen(page)
    assert decoded(await code.locator("svg").screenshot()) == [ticket["secret"]]
    # As a door scanner sees the whole screen, too.
    assert decoded(await screenshot(page, "ticket-page.png")) == [ticket["secret"]]

    # The calendar file of the event.
    async with page.expect_download() as downloading:
        await page.get_by_role("link", name="Add to your calendar (.ics)").click()
    download = await downloading.value
    assert download.suggested_filename == "event.ics"
    saved = await download.path()
    [event] = Calendar.from_ical(await asyncio.to_thread(saved.read_bytes)).walk("VEVENT")
    assert str(event["summary"]) == "Harbour Lights Festival"


async def test_the_states_after_scans(person: Person, server: Server) -> None:
    link = await server.claim_link(event=FESTIVAL, max_claims=10)
    async with server.api() as api:
        claimed = await api.post(f"/v1/claims/{link['token']}", json={"email": "bob@example.com"})
        assert claimed.status_code == 201, claimed.text
        ticket = await ticket_of(
            server, link["product_id"], claimed.json()["product_item"]["item_id"]
        )
        scanned = await api.post("/v1/checkins", json={"secret": ticket["secret"], "nonce": "b-1"})
        assert scanned.status_code == 200, scanned.text
    page = person.page
    await page.goto(claimed.json()["ticket_url"])
    state = page.locator("#state")
    await expect(state).to_contain_text("Fully redeemed, checked in at")
    await expect(state).to_have_css("border-left-color", "rgb(163, 22, 28)")
    await expect(page.locator("#holder")).to_have_text("No name given")
    await fits_the_screen(page)
    await screenshot(page, "ticket-redeemed.png")


async def test_a_reissued_ticket(person: Person, server: Server) -> None:
    link = await server.claim_link(max_claims=10)
    async with server.api() as api:
        claimed = await api.post(f"/v1/claims/{link['token']}", json={"email": "cy@example.com"})
        number = claimed.json()["product_item"]["item_id"]
        reissued = await api.post(
            f"/v1/products/{link['product_id']}/items/{number}/ticket/reissue"
        )
        assert reissued.status_code == 200
    page = person.page
    response = await page.goto(claimed.json()["ticket_url"])
    assert response is not None and response.status == 404
    await expect(page.get_by_role("heading", level=1)).to_have_text("This ticket is not valid")
    await expect(page.get_by_role("img")).to_have_count(0)
    await fits_the_screen(page)
    await screenshot(page, "ticket-not-valid.png")
    response = await page.goto(reissued.json()["url"])
    assert response is not None and response.status == 200
    assert decoded(await page.locator("svg").screenshot()) == [reissued.json()["secret"]]


async def test_axe_finds_nothing_serious(
    browser: Browser, server: Server, axe_script: Path
) -> None:
    # axe is injected as an inline script, which the pages' CSP forbids: this context alone
    # sets the CSP aside (the other tests run under it).
    context = await browser.new_context(**PHONE, bypass_csp=True)
    page = await context.new_page()
    found: dict[str, list[str]] = {}
    try:
        link = await server.claim_link(event=FESTIVAL, max_claims=10)
        async with server.api() as api:
            claimed = await api.post(
                f"/v1/claims/{link['token']}",
                json={"email": "dee@example.com", "firstName": "Dee"},
            )
            url = claimed.json()["ticket_url"]
            await page.goto(url)
            found["valid"] = await serious_violations(page, axe_script)
            ticket = await ticket_of(server, link["product_id"])
            await api.post("/v1/checkins", json={"secret": ticket["secret"], "nonce": "d-1"})
            await page.goto(url)
            await expect(page.locator("#state")).to_contain_text("Fully redeemed")
            found["redeemed"] = await serious_violations(page, axe_script)
            without = await api.post("/v1/products", json=PASS | {"name": "Perk"})
            user = await api.post("/v1/users/create", json=[{"email": "eve@example.com"}])
            issued = await api.post(
                f"/v1/products/{without.json()['id']}/items",
                json={"users": [user.json()["users"][0]["id"]]},
            )
            assert issued.status_code == 201, issued.text
        perk = await ticket_of(server, without.json()["id"])
        await page.goto(perk["url"])
        found["no event"] = await serious_violations(page, axe_script)
        await page.goto(f"{server.url}/tickets/not-a-ticket")
        found["not valid"] = await serious_violations(page, axe_script)
    finally:
        await context.close()
    assert found == {name: [] for name in found}
    assert len(found) == 4
