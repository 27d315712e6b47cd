"""The door scanner (``/scan``) when keys change under it, and when scans are refused: a real
browser (headless Chromium, a phone's screen) on a real ``tessera serve``, as in
test_scan_page.py, whose helpers these tests use.

- A check-in key retired (``tessera project rotate-checkin-key``, then ``retire-checkin-key``)
  leaves the scanner at its next sync: the page refuses the secrets it signed offline, and
  accepts the new key's.
- An API key the server refuses (revoked: 401; a read key uploading: 403) makes the page ask for
  another; the scans waiting go up with the new one, and the old key is kept nowhere.
- A sync the server answered before it took an upload, arriving after the upload's answer,
  does not undo the uses the page counted.
- A seated product's ticket, decided offline, names its holder and seat.
- A refused scan (unknown text, a bad signature, a ticket used already), at the door or at the
  server, changes no other ticket and no queued scan, and holds up nothing after it.

Each test has a project of its own on one server whose credentials are checked on every request
(``TESSERA_CREDENTIAL_CACHE_SECONDS=0``): a key revoked is refused at its next request.
"""

import asyncio
import base64
import os
import re
import secrets
import string
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.async_api import Browser, Locator, Page, Request, Route, expect

from tests.browser.test_claim_page import Person, screenshot
from tests.browser.test_scan_page import PHONE, Door, Server, door, scan, tampered
from tests.conftest import BACKEND
from tests.serving import fresh_database, serve, settings_env, tessera

pytestmark = pytest.mark.browser

# Everything the page keeps, read from its IndexedDB database (store.js) through a connection of
# our own, closed again (an open one would hold up "Sign out"'s deleteDatabase). Only once the
# page has opened it: opening a database that is not there would make an empty one.
READ_STORE = """
async () => {
  const db = await new Promise((resolve, reject) => {
    const request = indexedDB.open("tessera-scan");
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  const done = (request) =>
    new Promise((resolve, reject) => {
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  try {
    const tx = db.transaction(["state", "tickets", "queue", "scans"]);
    const state = tx.objectStore("state");
    const names = await done(state.getAllKeys());
    const values = await done(state.getAll());
    return {
      state: Object.fromEntries(names.map((name, i) => [name, values[i]])),
      tickets: await done(tx.objectStore("tickets").getAll()),
      queue: await done(tx.objectStore("queue").getAll()),
      scans: await done(tx.objectStore("scans").getAll()),
    };
  } finally {
    db.close();
  }
}
"""


@dataclass
class Host:
    url: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    directory = tmp_path_factory.mktemp("browser_scan_keys")
    env = settings_env(
        fresh_database(BACKEND, directory, f"browser_scan_keys_{worker}"),
        worker_in_process=False,
        credential_cache_seconds=0,
    )
    with serve(env, directory / "server.log") as url:
        yield Host(url, env)


async def cli(host: Host, *args: str) -> dict[str, Any]:
    """``tessera *args`` (its JSON answer), off the event loop the browser is driven from."""
    return await asyncio.to_thread(tessera, *args, env=host.env)


@dataclass
class Project:
    server: Server  # the project's write key, and a check-in key (the door's)
    project_id: str
    checkin_key_id: str


async def project(host: Host, name: str) -> Project:
    created = await cli(host, "project", "create", "--name", name)
    key = await checkin_key(host, created["project_id"])
    return Project(
        Server(host.url, created["api_key"], key["api_key"]), created["project_id"], key["id"]
    )


async def checkin_key(host: Host, project_id: str, permission: str = "checkin") -> dict[str, Any]:
    return await cli(host, "apikey", "create", "--project", project_id, "--permission", permission)


@dataclass
class Ticket:
    id: str  # the item's id (a UUID): the sync's `id`, GET /v1/checkins's `product_item_id`
    number: int  # the item's number within its product
    secret: str


async def more_tickets(server: Server, at: Door, *names: str) -> dict[str, Ticket]:
    """Tickets of the door's product for more people (first names; the last name is Stone)."""
    async with server.api() as api:
        body = [
            {"email": f"{n.lower()}@example.com", "firstName": n, "lastName": "Stone"}
            for n in names
        ]
        users = await api.post("/v1/users/create", json=body)
        assert users.status_code == 201, users.text
        ids = [user["id"] for user in users.json()["users"]]
        items = await api.post(f"/v1/products/{at.product['id']}/items", json={"users": ids})
        assert items.status_code == 201, items.text
        number = {item["user"]["id"]: item["item_id"] for item in items.json()["items"]}
    return {
        name: await ticket_of(server, at, number[user_id])
        for name, user_id in zip(names, ids, strict=True)
    }


async def ticket_of(server: Server, at: Door, number: int) -> Ticket:
    """The item's ticket as the server hands it out now (signed by the key it signs with now)."""
    async with server.api() as api:
        answer = await api.get(f"/v1/products/{at.product['id']}/items/{number}/ticket")
        assert answer.status_code == 200, answer.text
    async with server.api(server.checkin_key) as api:
        synced = await api.get("/v1/checkins/sync", params={"event_id": at.event["id"]})
        assert synced.status_code == 200, synced.text
    [ticket] = [t for t in synced.json()["tickets"] if t["item_id"] == number]
    return Ticket(ticket["id"], number, answer.json()["secret"])


def kid_of(secret: str) -> str:
    """The id of the key that signed a secret: bytes 1-4 of its base32."""
    raw = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    return raw[1:5].hex()


async def signed_by(server: Server, at: Door, number: int, kid: str) -> Ticket:
    """The item's ticket once the server signs with ``kid``: a rotation reaches a server within
    ``SIGNER_SECONDS`` (10 s), so it is asked again until then (and 20 s more)."""
    deadline = time.monotonic() + 30
    while True:
        ticket = await ticket_of(server, at, number)
        if kid_of(ticket.secret) == kid:
            return ticket
        assert time.monotonic() < deadline, f"the server still signs with {kid_of(ticket.secret)}"
        await asyncio.sleep(0.5)


async def stored(page: Page) -> dict[str, Any]:
    """What the page keeps in its IndexedDB database (store.js): state, tickets, queue, scans."""
    result: dict[str, Any] = await page.evaluate(READ_STORE)
    return result


async def until_stored_kids(page: Page, kids: set[str]) -> None:
    """Waits until the keys the page keeps (state.keys, as the last sync gave them) are
    ``kids``: a sync started before a change may still be on its way when one is asked for, and
    the next comes within 30 s. wait_for_function does not wait for a promise (an async
    predicate is a promise, always true), so each poll starts a read of the store if none is
    under way and looks at what the last one found."""
    await page.evaluate("window.storedKids = {reading: null, kids: null}")
    await page.wait_for_function(
        f"""(kids) => {{
              const seen = window.storedKids;
              seen.reading ??= ({READ_STORE})()
                .then((kept) => {{
                  seen.kids = (kept.state.keys ?? []).map((key) => key.kid).sort();
                }})
                .finally(() => {{
                  seen.reading = null;
                }});
              return JSON.stringify(seen.kids) === JSON.stringify(kids);
            }}""",
        arg=sorted(kids),
        polling=200,
        timeout=40_000,
    )


async def recorded(server: Server, at: Door) -> dict[str, tuple[Any, ...]]:
    """The scans the server recorded at the event's door (GET /v1/checkins, refused ones too):
    nonce -> (status, source, device, item id, annulled)."""
    async with server.api() as api:
        answer = await api.get("/v1/checkins", params={"event_id": at.event["id"], "limit": 100})
        assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["pagination"]["total"] == len(body["scans"])  # all of them, on this one page
    return {
        scan["nonce"]: (
            scan["status"],
            scan["source"],
            scan["device"],
            scan["product_item_id"],
            scan["annulled_at"] is not None,
        )
        for scan in body["scans"]
    }


async def sign_in(page: Page, key: str) -> None:
    """Types the key into the focused sign-in field and presses Enter."""
    field = page.get_by_label("Check-in API key")
    await expect(field).to_be_visible()
    await expect(field).to_be_focused()
    await page.keyboard.type(key)
    await page.keyboard.press("Enter")


async def open_door(page: Page, server: Server, at: Door, tickets: int) -> None:
    """Opens /scan, signs in with the door's key and picks the event; the first sync is in."""
    response = await page.goto(f"{server.url}/scan")
    assert response is not None and response.status == 200
    await sign_in(page, server.checkin_key)
    await pick(page, at)
    await expect(page.locator("#ticket-count")).to_have_text(str(tickets))
    await expect(page.locator("#synced")).not_to_have_text("never")


async def pick(page: Page, at: Door) -> None:
    await page.get_by_label("Event", exact=True).select_option(at.event["id"])
    await page.get_by_role("button", name="Scan tickets of this event").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(at.event["name"])


def row(page: Page, holder: str) -> Locator:
    """The row of the list of last scans that let the holder in (the newest, if several)."""
    ok = page.locator(".outcome.ok")
    return page.locator("#scans li").filter(has_text=holder).filter(has=ok).first


async def test_a_retired_key_leaves_the_door_at_its_next_sync(browser: Browser, host: Host) -> None:
    p = await project(host, "Retired Key")
    server = p.server
    at = await door(server)  # Ada's and Bob's secrets, signed by the project's first key
    [old] = {kid_of(at.ada_secret), kid_of(at.bob_secret)}
    cy = (await more_tickets(server, at, "Cy"))["Cy"]
    assert kid_of(cy.secret) == old
    context = await browser.new_context(**PHONE)
    person = Person(await context.new_page())
    person.listen()
    page = person.page
    try:
        await open_door(page, server, at, tickets=3)
        assert [key["kid"] for key in (await stored(page))["state"]["keys"]] == [old]

        # Rotated: the new key signs from now on, the old one still verifies.
        rotated = await cli(host, "project", "rotate-checkin-key", "--project", p.project_id)
        new = rotated["kid"]
        assert new != old and rotated["signing"] is True
        cy = await signed_by(server, at, cy.number, new)
        await page.get_by_role("button", name="Sync now").click()
        await until_stored_kids(page, {old, new})
        await page.get_by_label("Ticket code").focus()
        # Until it is retired, what the old key signed is still let in (and uploaded: ok).
        await scan(page, at.bob_secret, "ok", "OK")
        await expect(page.locator("#pending")).to_have_text("0", timeout=10_000)
        await expect(row(page, "Bob Stone")).to_contain_text("uploaded")
        await expect(row(page, "Bob Stone").locator(".conflict")).to_have_count(0)

        retired = await cli(
            host, "project", "retire-checkin-key", "--project", p.project_id, "--kid", old
        )
        assert retired["kid"] == old and retired["retired_at"] is not None
        await page.get_by_role("button", name="Sync now").click()
        await until_stored_kids(page, {new})

        await context.set_offline(True)
        await expect(page.locator("#network")).to_have_text("Offline")
        await page.get_by_label("Ticket code").focus()
        # Offline, the page knows no key of that id: refused, as a code it cannot check.
        await scan(page, at.ada_secret, "unknown", "UNKNOWN")
        await expect(page.locator("#verdict-detail")).to_have_text(
            "Not a ticket code this scanner knows."
        )
        await expect(page.locator("#pending")).to_have_text("0")
        await scan(page, cy.secret, "ok", "OK")
        await expect(page.locator("#verdict-detail")).to_have_text("Cy Stone")
        await expect(page.locator("#pending")).to_have_text("1")
        # Ada's scan was a refusal: it counted no use of her ticket, and nothing waits for it.
        kept = await stored(page)
        uses = {t["id"]: t["redemption_count"] for t in kept["tickets"]}
        ada_id = next(t["id"] for t in kept["tickets"] if t["holder_name"] == "Ada Lovelace")
        bob_id = next(t["id"] for t in kept["tickets"] if t["holder_name"] == "Bob Stone")
        assert uses == {ada_id: 0, bob_id: 1, cy.id: 1}
        [queued] = kept["queue"]
        assert (queued["ticket_id"], queued["secret"]) == (cy.id, cy.secret)
        await screenshot(page, "scan-retired-key.png")

        await context.set_offline(False)
        await expect(page.locator("#pending")).to_have_text("0", timeout=10_000)
        await expect(row(page, "Cy Stone")).to_contain_text("uploaded")
        await expect(row(page, "Cy Stone").locator(".conflict")).to_have_count(0)
        device = kept["state"]["device"]
        bob_nonce = next(s["nonce"] for s in kept["scans"] if s["holder"] == "Bob Stone")
        assert await recorded(server, at) == {
            bob_nonce: ("ok", "offline", device, bob_id, False),
            queued["nonce"]: ("ok", "offline", device, cy.id, False),
        }
        # The server says so too: what the retired key signed is revoked there.
        async with server.api(server.checkin_key) as api:
            body = {"secret": at.ada_secret, "nonce": "server-check", "event_id": at.event["id"]}
            answer = await api.post("/v1/checkins", json=body)
        assert (answer.status_code, answer.json()["reason"]) == (409, "revoked")
    finally:
        await context.close()
    person.check_served_alone(server.url, "/static/scan/scan.css")


@pytest.mark.parametrize("refusal", ["revoked", "read key"])
async def test_a_refused_key_is_replaced_and_the_queue_goes_up_with_the_new_one(
    browser: Browser, host: Host, refusal: str
) -> None:
    p = await project(host, f"Refused Key ({refusal})")
    at = await door(p.server)
    if refusal == "read key":  # it signs in and syncs, but may not upload: 403
        first = await checkin_key(host, p.project_id, "read")
    else:  # a check-in key, revoked once the door has synced: 401
        first = {"id": p.checkin_key_id, "api_key": p.server.checkin_key}
    second = await checkin_key(host, p.project_id)
    server = Server(p.server.url, p.server.api_key, first["api_key"])
    context = await browser.new_context(**PHONE)
    person = Person(await context.new_page())
    person.listen()
    page = person.page
    sent: list[tuple[str, str, str | None]] = []  # the API calls: method, path, key

    def api_call(request: Request) -> None:
        if "/v1/" in request.url:
            path = request.url.removeprefix(server.url).split("?")[0]
            sent.append((request.method, path, request.headers.get("x-api-key")))

    page.on("request", api_call)
    try:
        await open_door(page, server, at, tickets=2)
        assert (await stored(page))["state"]["apiKey"] == first["api_key"]
        if refusal == "revoked":
            revoked = await cli(
                host, "apikey", "revoke", "--project", p.project_id, "--id", first["id"]
            )
            assert revoked["revoked_at"] is not None

        # Decided here as ever; its upload is refused, which stops uploads and syncs.
        await scan(page, at.ada_secret, "ok", "OK")
        status = 401 if refusal == "revoked" else 403
        problem = page.locator("#key-problem")
        await expect(problem).to_be_visible()
        await expect(page.locator("#key-problem-text")).to_have_text(
            re.compile(
                r"^The API key was refused \(.+\): uploads and syncs have stopped\. Enter a new "
                r"check-in key: the scans waiting to upload are kept, and go up with it\.$"
            )
        )
        await expect(page.locator("#pending")).to_have_text("1")
        await expect(row(page, "Ada Lovelace")).to_contain_text("waiting to upload")
        assert person.failed == [f"{status} {server.url}/v1/checkins/batch"]
        assert await recorded(server, at) == {}
        # Stopped: a sync asked for now does not go out with the refused key.
        calls = len(sent)
        await page.get_by_role("button", name="Sync now").click()
        await page.get_by_label("Ticket code").focus()
        # The next scan is still decided (offline, by the page), and queued behind the first.
        await scan(page, at.bob_secret, "ok", "OK")
        await expect(page.locator("#pending")).to_have_text("2")
        assert sent[calls:] == []
        await screenshot(page, f"scan-key-refused-{refusal.replace(' ', '-')}.png")

        await page.get_by_role("button", name="Enter a new key").click()
        await expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
        if refusal == "revoked":
            # The same key again is refused at once, and changes nothing.
            await sign_in(page, first["api_key"])
            await expect(page.locator("#sign-in-problem")).to_contain_text("This key was refused: ")
            await expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
            await page.get_by_label("Check-in API key").fill("")
            await page.get_by_label("Check-in API key").focus()
        # A key of another project would take the waiting scans to it, which would refuse
        # them and lose them: refused here, the queue kept.
        stranger = await project(host, f"Another Project ({refusal})")
        await sign_in(page, stranger.server.checkin_key)
        await expect(page.locator("#sign-in-problem")).to_have_text(
            "This key is of another project: 2 scans waiting to upload are for an event it "
            "does not know. Enter a key of the project they were scanned for."
        )
        await expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
        await page.get_by_label("Check-in API key").fill("")
        kept = await stored(page)
        assert kept["state"]["apiKey"] == first["api_key"]  # until a good one replaces it
        assert stranger.server.checkin_key not in repr(kept)
        assert len(kept["queue"]) == 2
        before = len(sent)
        await sign_in(page, second["api_key"])
        await expect(page.get_by_label("Check-in API key")).to_have_value("")
        # The event chosen before is chosen still: one press and the door is back.
        await expect(page.get_by_label("Event", exact=True)).to_have_value(at.event["id"])
        await pick(page, at)
        await expect(problem).to_be_hidden()
        await expect(page.locator("#pending")).to_have_text("0", timeout=10_000)
        await expect(row(page, "Ada Lovelace")).to_contain_text("uploaded")
        await expect(row(page, "Bob Stone")).to_contain_text("uploaded")
        await expect(page.locator("#scans .conflict")).to_have_count(0)
        await expect(page.locator("#ticket-count")).to_have_text("2")

        # The old key is kept nowhere: not in the page's store, not in any request since.
        kept_now = await stored(page)
        assert kept_now["state"]["apiKey"] == second["api_key"]
        assert first["api_key"] not in repr(kept_now)
        after = sent[before:]
        assert ("POST", "/v1/checkins/batch", second["api_key"]) in after
        assert ("GET", "/v1/checkins/sync", second["api_key"]) in after
        assert {key for _, _, key in after} == {second["api_key"]}
        device = kept["state"]["device"]
        assert kept_now["state"]["device"] == device  # the same door, under its new key
        ada_id, bob_id = (
            t["ticket_id"] for t in sorted(kept["queue"], key=lambda s: s["scanned_at"])
        )
        nonces = [s["nonce"] for s in sorted(kept["queue"], key=lambda s: s["scanned_at"])]
        assert await recorded(server, at) == {
            nonces[0]: ("ok", "offline", device, ada_id, False),
            nonces[1]: ("ok", "offline", device, bob_id, False),
        }
        # And the door goes on: the same ticket again is refused, here, as it would be there.
        await scan(page, at.ada_secret, "already_checked_in", "ALREADY CHECKED IN")
        # What was refused: the upload, and (revoked) the sign-in with the same key again.
        refused = ["/v1/checkins/batch"] + (["/v1/checkins/events"] if refusal == "revoked" else [])
        assert person.failed == [f"{status} {server.url}{path}" for path in refused]
        assert person.console_errors == []
    finally:
        await context.close()


async def test_a_refused_scan_changes_no_other_ticket_and_holds_up_nothing(
    browser: Browser, host: Host
) -> None:
    p = await project(host, "Refused Scans")
    server = p.server
    at = await door(server)
    more = await more_tickets(server, at, "Cy", "Dee")
    cy, dee = more["Cy"], more["Dee"]
    context = await browser.new_context(**PHONE)
    person = Person(await context.new_page())
    person.listen()
    page = person.page
    try:
        await open_door(page, server, at, tickets=4)
        synced = {t["holder_name"]: t["id"] for t in (await stored(page))["tickets"]}
        ada_id, bob_id = synced["Ada Lovelace"], synced["Bob Stone"]

        # Online, text that is no signed code is the server's to judge: it knows no such ticket.
        noise = "".join(secrets.choice(string.ascii_letters) for _ in range(43))
        await scan(page, noise, "unknown", "UNKNOWN")
        await expect(page.locator("#scans li").first).to_contain_text("answered by the server")

        await context.set_offline(True)
        await expect(page.locator("#network")).to_have_text("Offline")
        # Cy comes in at another door, online, while this one is cut off.
        async with server.api() as api:
            body = {"secret": cy.secret, "nonce": "door-2", "event_id": at.event["id"]}
            elsewhere = await api.post("/v1/checkins", json=body)
            assert elsewhere.status_code == 200, elsewhere.text

        await scan(page, at.ada_secret, "ok", "OK")
        await scan(page, tampered(at.bob_secret), "invalid", "INVALID")
        await scan(page, at.ada_secret, "already_checked_in", "ALREADY CHECKED IN")
        await scan(page, noise.lower(), "unknown", "UNKNOWN")
        await expect(page.locator("#verdict-detail")).to_contain_text(
            "the server cannot be reached"
        )
        await scan(page, at.bobs_old_secret, "revoked", "REVOKED")
        await expect(page.locator("#pending")).to_have_text("1")
        # None of those refusals touched a ticket: Bob's (twice refused) and Cy's are let in.
        await scan(page, at.bob_secret, "ok", "OK")
        await expect(page.locator("#verdict-detail")).to_have_text("Bob Stone")
        await scan(page, cy.secret, "ok", "OK")
        await expect(page.locator("#verdict-detail")).to_have_text("Cy Stone")
        await expect(page.locator("#pending")).to_have_text("3")
        await expect(page.locator("#scans li")).to_have_count(8)

        kept = await stored(page)
        uses = {t["id"]: t["redemption_count"] for t in kept["tickets"]}
        assert uses == {ada_id: 1, bob_id: 1, cy.id: 1, dee.id: 0}
        queue = sorted(kept["queue"], key=lambda s: s["scanned_at"])
        assert [(s["ticket_id"], s["secret"]) for s in queue] == [
            (ada_id, at.ada_secret),
            (bob_id, at.bob_secret),
            (cy.id, cy.secret),
        ]
        outcomes = [s["outcome"] for s in sorted(kept["scans"], key=lambda s: s["at"])]
        assert outcomes == [
            "unknown",
            "ok",
            "invalid",
            "already_checked_in",
            "unknown",
            "revoked",
            "ok",
            "ok",
        ]

        # Back online: the queue goes up in one batch; the server refuses Cy's (door 2 had him
        # first), and takes the others.
        await context.set_offline(False)
        await expect(page.locator("#pending")).to_have_text("0", timeout=10_000)
        await expect(row(page, "Cy Stone")).to_contain_text(
            "conflict: already checked in elsewhere"
        )
        for holder in ("Ada Lovelace", "Bob Stone"):
            await expect(row(page, holder)).to_contain_text("uploaded")
            await expect(row(page, holder).locator(".conflict")).to_have_count(0)
        # Later scans are not held up either: Dee, and a forged code again.
        await scan(page, dee.secret, "ok", "OK")
        await expect(page.locator("#pending")).to_have_text("0", timeout=10_000)
        await expect(row(page, "Dee Stone")).to_contain_text("uploaded")
        await expect(row(page, "Dee Stone").locator(".conflict")).to_have_count(0)
        await scan(page, tampered(dee.secret), "invalid", "INVALID")

        device = kept["state"]["device"]
        scans = sorted((await stored(page))["scans"], key=lambda s: s["at"])
        asked, dees = scans[0]["nonce"], scans[8]["nonce"]
        assert (scans[0]["outcome"], scans[8]["outcome"]) == ("unknown", "ok")
        # Recorded: the server's own refusal, door 2's check-in, and the OKs uploaded; none of
        # the refusals decided here.
        assert await recorded(server, at) == {
            asked: ("unknown", "api", None, None, False),
            "door-2": ("ok", "api", None, cy.id, False),
            queue[0]["nonce"]: ("ok", "offline", device, ada_id, False),
            queue[1]["nonce"]: ("ok", "offline", device, bob_id, False),
            queue[2]["nonce"]: ("already_checked_in", "offline", device, cy.id, False),
            dees: ("ok", "offline", device, dee.id, False),
        }
        # The refused POST /v1/checkins is the only response that was not a success.
        assert person.failed == [f"404 {server.url}/v1/checkins"]
        assert person.console_errors == []
    finally:
        await context.close()


async def test_a_sync_read_before_an_upload_does_not_undo_the_use_counted_here(
    browser: Browser, host: Host
) -> None:
    """The race CI met once: back online, the page asks for a sync and uploads its queue at
    once; the server reads the sync's answer before it takes the upload, and the answer arrives
    after the upload's. That answer does not have Ada's check-in, and must not undo it here: her
    code again is ALREADY CHECKED IN. The routes below make that order certain."""
    p = await project(host, "Crossed Sync")
    server = p.server
    at = await door(server)
    context = await browser.new_context(**PHONE)
    person = Person(await context.new_page())
    person.listen()
    page = person.page
    read = asyncio.Event()  # the server has read the held sync's answer
    release = asyncio.Event()  # the test lets that answer reach the page

    async def held_sync(route: Route) -> None:
        answer = await route.fetch()
        read.set()
        await release.wait()
        await route.fulfill(response=answer)

    async def upload_after_the_read(route: Route) -> None:
        await read.wait()
        await route.continue_()

    try:
        await open_door(page, server, at, tickets=2)
        await context.set_offline(True)
        await scan(page, at.ada_secret, "ok", "OK")
        await expect(page.locator("#pending")).to_have_text("1")
        before = (await stored(page))["state"]["syncedAt"]
        await page.route("**/v1/checkins/sync?*", held_sync)
        await page.route("**/v1/checkins/batch", upload_after_the_read)
        await context.set_offline(False)
        await expect(page.locator("#pending")).to_have_text("0", timeout=10_000)
        await expect(row(page, "Ada Lovelace")).to_contain_text("uploaded")
        assert read.is_set()  # the sync's answer was read before the upload went up
        release.set()
        deadline = time.monotonic() + 10
        while (await stored(page))["state"]["syncedAt"] == before:  # the held answer is in
            assert time.monotonic() < deadline, "the held sync's answer never reached the store"
            await asyncio.sleep(0.2)
        await page.unroute_all()
        await scan(page, at.ada_secret, "already_checked_in", "ALREADY CHECKED IN")
        [ada] = [t for t in (await stored(page))["tickets"] if t["holder_name"] == "Ada Lovelace"]
        assert ada["redemption_count"] == 1
        assert person.failed == []
    finally:
        await context.close()


async def test_a_seated_tickets_verdict_names_its_seat(browser: Browser, host: Host) -> None:
    """Not a key's story, but the door's: a seated product's ticket, decided offline, says
    whose it is and where they sit."""
    p = await project(host, "Seated Door")
    server = p.server
    async with server.api() as api:

        async def ok(method: str, path: str, body: Any) -> Any:
            answer = await api.request(method, path, json=body)
            assert answer.status_code in (200, 201), answer.text
            return answer.json()

        event = await ok(
            "POST",
            "/v1/events/create",
            {
                "name": "Seated Night",
                "location": "Hall",
                "address": "Main Street 1",
                "start_date": int(time.time()),
                "end_date": int(time.time()) + 3600,
            },
        )
        seats = [{"number": str(n), "category": "stalls"} for n in (11, 12)]
        plan = {"areas": [{"name": "Stalls", "rows": [{"name": "A", "seats": seats}]}]}
        await ok("PUT", f"/v1/events/{event['id']}/seating", plan)
        product = await ok(
            "POST",
            "/v1/products",
            {
                "type": "admission",
                "name": "Seat",
                "event_id": event["id"],
                "seat_category": "stalls",
            },
        )
        people = [
            {"email": "ada@example.com", "firstName": "Ada", "lastName": "Lovelace"},
            {"email": "bob@example.com", "firstName": "Bob", "lastName": "Stone"},
        ]
        ada, bob = (await ok("POST", "/v1/users/create", people))["users"]
        held = await ok("POST", "/v1/seat-holds", {"product_id": product["id"], "count": 2})
        body = {"users": [ada["id"], bob["id"]], "hold_id": held["id"]}
        items = (await ok("POST", f"/v1/products/{product['id']}/items", body))["items"]
        secrets_of = [
            (await ok("GET", f"/v1/products/{product['id']}/items/{i['item_id']}/ticket", None))[
                "secret"
            ]
            for i in items
        ]
    at = Door(event, product, ada, bob, secrets_of[0], secrets_of[1], secrets_of[1])
    context = await browser.new_context(**PHONE)
    person = Person(await context.new_page())
    person.listen()
    page = person.page
    try:
        await open_door(page, server, at, tickets=2)
        await context.set_offline(True)
        await scan(page, at.ada_secret, "ok", "OK")
        await expect(page.locator("#verdict-detail")).to_have_text(
            "Ada Lovelace · Stalls, row A, seat 11"
        )
        await scan(page, at.bob_secret, "ok", "OK")
        await expect(page.locator("#verdict-detail")).to_have_text(
            "Bob Stone · Stalls, row A, seat 12"
        )
        assert person.console_errors == []
    finally:
        await context.close()
