"""The offline door scanner (``/scan``) on a phone at a door whose network has gone: a real browser
(headless Chromium, 360 CSS pixels wide) on a real ``tessera serve``. The scanner signs in with a
check-in key, syncs the event, and then, offline, decides each ticket itself from the signed
secret; a reload comes from its service worker with the queue intact, and once back online the
queue is uploaded and the server holds the check-in at the time of the offline scan. The page's
own resources only, no CSP complaint, and axe-core finds nothing.

Screenshots go to artifacts/screenshots/ (not committed).
"""

import asyncio
import os
import secrets
import string
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, expect
from playwright.async_api import Error as PlaywrightError

from tests.browser.test_claim_page import Person, screenshot
from tests.conftest import BACKEND
from tests.serving import fresh_database, serve, settings_env, tessera

pytestmark = pytest.mark.browser

PHONE: dict[str, Any] = {"viewport": {"width": 360, "height": 740}, "device_scale_factor": 2}
SIGNATURE_AT = 100  # a character of the signature part (bytes 25-88 are characters 40-142)


@dataclass
class Server:
    url: str
    api_key: str  # the project's write key
    checkin_key: str

    def api(self, key: str | None = None) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"x-api-key": key or self.api_key})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    directory = tmp_path_factory.mktemp("browser_scan")
    env = settings_env(
        fresh_database(BACKEND, directory, f"browser_scan_{worker}"), worker_in_process=False
    )
    with ThreadPoolExecutor(1) as pool:
        created = pool.submit(tessera, "project", "create", "--name", "Harbour Lights", env=env)
        with serve(env, directory / "server.log") as url:
            project = created.result()
            key = tessera(
                "apikey",
                "create",
                "--project",
                project["project_id"],
                "--permission",
                "checkin",
                env=env,
            )
            yield Server(url, project["api_key"], key["api_key"])


@dataclass
class Door:
    """An event, a single-use admission to it, and two holders' tickets: Ada's secret, Bob's,
    and the one Bob held before his ticket was reissued."""

    event: dict[str, Any]
    product: dict[str, Any]
    ada: dict[str, Any]
    bob: dict[str, Any]
    ada_secret: str
    bobs_old_secret: str
    bob_secret: str


async def door(server: Server) -> Door:
    now = int(time.time())
    async with server.api() as api:

        async def created(path: str, body: object) -> dict[str, Any]:
            answer = await api.post(path, json=body)
            assert answer.status_code in (200, 201), answer.text
            result: dict[str, Any] = answer.json()
            return result

        event = await created(
            "/v1/events/create",
            {
                "name": "Harbour Lights",
                "location": "Quay 4",
                "address": "Harbour Road 1",
                "start_date": now,
                "end_date": now + 6 * 3600,
            },
        )
        product = await created(
            "/v1/products",
            {
                "type": "admission",
                "name": "Evening pass",
                "description": "One entry.",
                "event_id": event["id"],
                "redemption_quantity": 1,
            },
        )
        users = await created(
            "/v1/users/create",
            [
                {"email": "ada@example.com", "firstName": "Ada", "lastName": "Lovelace"},
                {"email": "bob@example.com", "firstName": "Bob", "lastName": "Stone"},
            ],
        )
        ada, bob = users["users"]
        items = await created(
            f"/v1/products/{product['id']}/items", {"users": [ada["id"], bob["id"]]}
        )
        number = {item["user"]["id"]: item["item_id"] for item in items["items"]}
        tickets = f"/v1/products/{product['id']}/items"
        ada_ticket = (await api.get(f"{tickets}/{number[ada['id']]}/ticket")).json()
        bobs_old = (await api.get(f"{tickets}/{number[bob['id']]}/ticket")).json()
        reissued = await created(f"{tickets}/{number[bob['id']]}/ticket/reissue", None)
        assert reissued["secret"] != bobs_old["secret"]
    return Door(
        event, product, ada, bob, ada_ticket["secret"], bobs_old["secret"], reissued["secret"]
    )


def tampered(secret: str) -> str:
    """The secret with one character of its signature changed: still base32, still 143."""
    changed = "B" if secret[SIGNATURE_AT].upper() != "B" else "C"
    return secret[:SIGNATURE_AT] + changed + secret[SIGNATURE_AT + 1 :]


async def scan(page: Page, text: str, outcome: str, word: str) -> None:
    """Types ``text`` as a keyboard-wedge scanner does (the code, then Enter) into the focused
    field; the verdict says ``word``, and the field is empty and focused for the next one."""
    field = page.get_by_label("Ticket code")
    await expect(field).to_be_focused()
    await page.keyboard.type(text)
    await page.keyboard.press("Enter")
    verdict = page.get_by_role("status")
    await expect(verdict).to_have_attribute("data-outcome", outcome)
    await expect(page.locator("#verdict-word")).to_have_text(word)
    await expect(field).to_have_value("")
    await expect(field).to_be_focused()


async def controlled(page: Page) -> None:
    """The service worker controls the page (it claims it on activation; a reload if not)."""
    ready = "navigator.serviceWorker.controller !== null"
    try:
        await page.wait_for_function(ready, timeout=5_000)
    except PlaywrightError:
        await page.reload()
        await page.wait_for_function(ready, timeout=5_000)


async def attendee_of(server: Server, door: Door, user: dict[str, Any]) -> dict[str, Any] | None:
    async with server.api() as api:
        answer = await api.get(f"/v1/events/{door.event['id']}/attendees")
        assert answer.status_code == 200, answer.text
    found = [a for a in answer.json()["attendees"] if a["user"]["id"] == user["id"]]
    return found[0] if found else None


async def fits_the_screen(page: Page) -> None:
    widths = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1] == 360, widths


async def axe_violations(page: Page, axe_script: Path) -> list[str]:
    # Evaluated through the DevTools protocol, which the page's CSP does not govern: the page
    # keeps its CSP (a <script> tag of axe would be refused).
    await page.evaluate(await asyncio.to_thread(axe_script.read_text, encoding="utf-8"))
    result = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']]}"
        for v in result["violations"]
    ]


async def test_a_door_checks_tickets_in_offline(
    browser: Browser, server: Server, axe_script: Path
) -> None:
    tickets = await door(server)
    context = await browser.new_context(**PHONE)
    person = Person(await context.new_page())
    person.listen()
    # What the service worker fetches too: nothing may leave the server's origin.
    context.on("request", lambda request: person.requests.append(request.url))
    page = person.page
    try:
        response = await page.goto(f"{server.url}/scan")
        assert response is not None and response.status == 200
        assert response.headers["permissions-policy"] == "camera=(self)"
        await expect(page).to_have_title("Door scanner · Tessera")
        await expect(page.get_by_label("Check-in API key")).to_be_focused()
        await page.keyboard.type(server.checkin_key)
        await page.keyboard.press("Enter")
        await page.get_by_label("Event", exact=True).select_option(tickets.event["id"])
        await page.get_by_role("button", name="Scan tickets of this event").click()
        await expect(page.get_by_role("heading", level=1)).to_have_text("Harbour Lights")
        await expect(page.locator("#ticket-count")).to_have_text("2")
        await expect(page.locator("#synced")).not_to_have_text("never")
        # No camera in a headless browser: no Camera button.
        await expect(page.get_by_role("button", name="Camera")).to_be_hidden()
        await controlled(page)

        await context.set_offline(True)
        await expect(page.locator("#network")).to_have_text("Offline")
        before = time.time()
        await scan(page, tickets.ada_secret, "ok", "OK")
        after = time.time()
        await expect(page.locator("#verdict-detail")).to_contain_text("Ada Lovelace")
        # The same code again, in lower case (a scanner's caps lock): one use only.
        await scan(page, tickets.ada_secret.lower(), "already_checked_in", "ALREADY CHECKED IN")
        await expect(page.locator("#verdict-detail")).to_contain_text("checked in at")
        await scan(page, tampered(tickets.ada_secret), "invalid", "INVALID")
        await scan(page, tickets.bobs_old_secret, "revoked", "REVOKED")
        noise = "".join(secrets.choice(string.ascii_letters) for _ in range(43))
        await scan(page, noise, "unknown", "UNKNOWN")
        # Bob came in at another door, online, while this one was cut off: it lets him in too,
        # and learns of it when it uploads.
        async with server.api() as api:
            body = {
                "secret": tickets.bob_secret,
                "nonce": "door-2",
                "event_id": tickets.event["id"],
            }
            at_door_2 = int(time.time())
            elsewhere = await api.post("/v1/checkins", json=body)
            assert elsewhere.status_code == 200, elsewhere.text
        await scan(page, tickets.bob_secret, "ok", "OK")
        scanned_bob = time.time()
        await expect(page.locator("#verdict-detail")).to_contain_text("Bob Stone")
        await expect(page.locator("#pending")).to_have_text("2")
        await expect(page.locator("#scans li")).to_have_count(6)
        await fits_the_screen(page)
        await screenshot(page, "scan-offline.png")

        # Offline, the page still opens (from the service worker), with its queue.
        response = await page.reload()
        assert response is not None and response.from_service_worker
        await expect(page.locator("#pending")).to_have_text("2")
        await expect(page.locator("#scans li")).to_have_count(6)
        ok_row = page.locator("#scans li").filter(has_text="Ada Lovelace").last
        scanned_at = await ok_row.locator("time").get_attribute("datetime")
        assert scanned_at is not None
        scanned = int(datetime.fromisoformat(scanned_at).timestamp())
        assert int(before) <= scanned <= after

        await context.set_offline(False)
        await expect(page.locator("#pending")).to_have_text("0", timeout=10_000)
        await expect(ok_row).to_contain_text("uploaded")
        ada = await attendee_of(server, tickets, tickets.ada)
        assert ada is not None and ada["checked_in_at"] == scanned
        bob_row = page.locator("#scans li").filter(has_text="Bob Stone").first
        await expect(bob_row).to_contain_text("conflict: already checked in elsewhere")
        bob = await attendee_of(server, tickets, tickets.bob)
        assert bob is not None and at_door_2 <= bob["checked_in_at"] <= scanned_bob  # door 2's

        # Without WebCrypto's Ed25519, the vendored library decides alike.
        async with server.api(server.checkin_key) as api:
            synced = await api.get("/v1/checkins/sync", params={"event_id": tickets.event["id"]})
        [key] = synced.json()["keys"]
        checks = await page.evaluate(
            """async ([key, good, bad]) => {
                 const s = await import("/static/scan/secret.js");
                 const publicKey = s.base64urlDecode(key);
                 const verdicts = [];
                 for (const how of ["webcrypto", "noble"]) {
                   for (const text of [good, bad]) {
                     verdicts.push(await s.verifySignature(publicKey, s.parseSigned(text), how));
                   }
                 }
                 return verdicts;
               }""",
            [key["public_key"], tickets.ada_secret, tampered(tickets.ada_secret)],
        )
        assert checks == [True, False, True, False]

        await scan(page, tickets.ada_secret, "already_checked_in", "ALREADY CHECKED IN")
        assert await axe_violations(page, axe_script) == []
        await screenshot(page, "scan-online.png")
    finally:
        await context.close()
    person.check_served_alone(server.url, "/static/scan/scan.css")
