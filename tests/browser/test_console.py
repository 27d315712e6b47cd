"""The operator console as a person uses it: a real browser (headless Chromium) on a real
``tessera serve``, on the suite's database, under the pages' content security policy. Every
page loads from the server alone, with nothing for the browser to complain about, and axe-core
finds nothing serious or critical on any of them.

Screenshots of every page go to artifacts/screenshots/console-*.png (not committed); the door
view after a check-in and the product page with its sales chart also to docs/console-door.png
and docs/console-product.png, the pictures in docs/console.md (their content is fixed, so
the files only change when the pages' look does).
"""

import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import (
    Browser,
    BrowserContext,
    FloatRect,
    Locator,
    Page,
    Response,
    expect,
)
from sqlalchemy import update

from tessera.jobs.queue import JobKind, enqueue
from tessera.models import OrderItem, Product, ProductItem
from tessera.models.base import utcnow
from tessera.reconciliation.repository import LastCheck, write_check
from tests import orm
from tests.browser.test_claim_page import Person, serious_violations
from tests.conftest import BACKEND, database_at
from tests.serving import ROOT, fresh_database, serve, settings_env, tessera

pytestmark = pytest.mark.browser

SCREENSHOTS = ROOT / "artifacts" / "screenshots"
DOOR_PICTURE = ROOT / "docs" / "console-door.png"
PRODUCT_PICTURE = ROOT / "docs" / "console-product.png"
VIEWPORT = {"width": 1200, "height": 800}
DOOR_FIELD = "Scan a ticket, or type an email, reference id or item id"

OPERATOR_EMAIL = "ops@example.com"
OPERATOR_PASSWORD = "correct horse battery staple"
# What the pictures in docs/console.md show: fixed, so that the pictures are too.
PROJECT = "Harbour Lights"
FESTIVAL = "Harbour Lights Festival"
PASS = "Weekend pass"
PEOPLE = [
    {"email": "ada@example.com", "firstName": "Ada", "lastName": "Lovelace"},
    {"email": "grace@example.com", "firstName": "Grace", "lastName": "Hopper"},
    {"email": "alan@example.com", "firstName": "Alan", "lastName": "Turing"},
]
# Alan's orders of weekend passes, by the UTC day their lines are dated to.
SALES = {"2030-05-27": 3, "2030-05-28": 5, "2030-05-30": 2, "2030-05-31": 4}


@dataclass
class Server:
    url: str
    database_url: str
    other_project_id: str
    other_key: str  # the write API key of a second project, "Other"

    def api(self, key: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"x-api-key": key})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    directory = tmp_path_factory.mktemp("console")
    url = fresh_database(BACKEND, directory, f"console_{worker}")
    # No job worker: a failed job stays failed, a retried one stays queued.
    env = settings_env(url, worker_in_process=False)
    operator = env | {"TESSERA_OPERATOR_PASSWORD": OPERATOR_PASSWORD}
    # The CLI's work runs while the server starts.
    with ThreadPoolExecutor(2) as pool:
        other = pool.submit(tessera, "project", "create", "--name", "Other", env=env)
        created = pool.submit(
            tessera, "operator", "create", "--email", OPERATOR_EMAIL, env=operator
        )
        with serve(env, directory / "server.log") as served:
            assert created.result()["email"] == OPERATOR_EMAIL
            project = other.result()
            yield Server(served, url, str(project["project_id"]), project["api_key"])


@dataclass
class Visitor(Person):
    """A ``Person`` (a tab and what it fetched or complained about) and the console pages it got,
    with their content security policy."""

    context: BrowserContext | None = None
    unprotected: list[str] = field(default_factory=list)

    def saw(self, response: Response) -> None:
        super().saw(response)
        # A redirect renders nothing; every page shown has the policy.
        shown = response.request.resource_type == "document" and not 300 <= response.status < 400
        if shown and "content-security-policy" not in response.headers:
            self.unprotected.append(response.url)


async def visitor(browser: Browser, *, bypass_csp: bool = False) -> Visitor:
    context = await browser.new_context(viewport=VIEWPORT, bypass_csp=bypass_csp)
    visit = Visitor(await context.new_page(), context=context)
    visit.listen()
    return visit


@pytest.fixture
async def person(browser: Browser, server: Server) -> AsyncIterator[Visitor]:
    visit = await visitor(browser)
    yield visit
    await leave(visit, server)


async def leave(visit: Visitor, server: Server) -> None:
    """Close the tab's context: every page was served from the server alone, the browser found
    nothing to complain about, and each console page had its CSP."""
    assert visit.context is not None
    await visit.context.close()
    visit.check_served_alone(server.url, "/static/console.css")
    assert visit.unprotected == []


async def screenshot(page: Page, name: str, **options: Any) -> bytes:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return await page.screenshot(path=SCREENSHOTS / f"console-{name}.png", **options)


def keep_picture(path: Path, picture: bytes) -> None:
    """A picture of docs/console.md, rewritten only when the page's look changed."""
    path.parent.mkdir(exist_ok=True)
    if not path.exists() or path.read_bytes() != picture:
        path.write_bytes(picture)


async def down_to(element: Locator) -> FloatRect:
    """The region of a docs/console.md picture: the page's full width, from the top down to
    just below ``element``."""
    box = await element.bounding_box()
    assert box is not None
    return {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": box["y"] + box["height"] + 16}


async def submit(page: Page, action: Locator | str, status: int) -> None:
    """Submit a form (by clicking ``action``, or pressing the key ``action``) and wait for the
    page it leads to; the POST answered ``status``."""
    # The page it leads to has loaded: the answer's arrival alone says nothing of that.
    async with page.expect_event("load"):
        async with page.expect_response(lambda r: r.request.method == "POST") as posted:
            if isinstance(action, str):
                await page.keyboard.press(action)
            else:
                await action.click()
    assert (await posted.value).status == status


async def go(page: Page, url: str, status: int = 200) -> None:
    response = await page.goto(url)
    assert response is not None and response.status == status


def nav(page: Page, name: str) -> Locator:
    return page.get_by_role("navigation", name="Sections").get_by_role("link", name=name)


def form_with(page: Page, button: str) -> Locator:
    return page.locator("form").filter(has=page.get_by_role("button", name=button))


async def rows_of(table: Locator) -> list[list[str]]:
    """The body rows of a table, each as its cells' text."""
    found = []
    for row in await table.locator("tbody tr").all():
        found.append([cell.strip() for cell in await row.locator("th, td").all_inner_texts()])
    return found


async def mint_counts(counts: Locator) -> list[int]:
    """The jobs page's counts of mints by status, the same in the row of all kinds."""
    rows = {row[0]: [int(n) for n in row[1:]] for row in await rows_of(counts)}
    assert rows.keys() == {JobKind.MINT, "All kinds"}
    assert rows[JobKind.MINT] == rows["All kinds"]
    return rows[JobKind.MINT]


async def secret(page: Page, label: str) -> str:
    return (await page.locator(f"dl.secrets dt:text-is('{label}') + dd").inner_text()).strip()


async def sign_in(page: Page, server: Server) -> None:
    await go(page, f"{server.url}/console/login")
    await page.get_by_label("Email").fill(OPERATOR_EMAIL)
    await page.get_by_label("Password").fill(OPERATOR_PASSWORD)
    await submit(page, page.get_by_role("button", name="Sign in", exact=True), 303)
    await expect(page.get_by_role("heading", level=1)).to_have_text("Projects")


async def failed_mint(server: Server, project_id: str, item_id: str) -> None:
    """A mint of a real item that gave up, as the worker leaves it: written straight into the
    server's database (nothing in the API makes a job fail)."""
    database = database_at(server.database_url)
    try:
        async with database.transaction() as tx:
            await enqueue(
                tx,
                [
                    {
                        "project_id": uuid.UUID(project_id),
                        "kind": JobKind.MINT,
                        "subject": f"item:{item_id}",
                        "payload": {"product_item_id": item_id},
                        "status": "failed",
                        "attempts": 8,
                        "last_error": "RuntimeError: boom",
                    }
                ],
            )
            await tx.commit()
    finally:
        await database.dispose()


async def date_sales(server: Server, dated: dict[str, str]) -> None:
    """Date each order's lines (by order id) to noon UTC of a day: the API dates an order now,
    and the chart in docs/console.md must not change with the calendar."""
    database = database_at(server.database_url)
    try:
        async with orm.session(database) as session:
            for order_id, day in dated.items():
                noon = datetime.fromisoformat(f"{day}T12:00").replace(tzinfo=UTC)
                await session.execute(
                    update(OrderItem)
                    .where(OrderItem.order_id == uuid.UUID(order_id))
                    .values(created_at=noon)
                )
            await session.commit()
    finally:
        await database.dispose()


async def drifted(server: Server, product_id: str, findings: list[dict[str, Any]]) -> None:
    """The product made an NFT product whose items are minted, and a last reconciliation with
    ``findings``: written straight into the server's database (the server has no chain)."""
    database = database_at(server.database_url)
    try:
        async with orm.session(database) as session:
            product = uuid.UUID(product_id)
            await session.execute(
                update(Product)
                .where(Product.id == product)
                .values(
                    mint_nft=True,
                    chain="AssetHub",
                    metadata_uri="https://meta.example/drift.json",
                    nft_status="created",
                    nft_collection_id=7,
                )
            )
            await session.execute(
                update(ProductItem)
                .where(ProductItem.product_id == product)
                .values(nft_status="minted")
            )
            await session.commit()
        async with database.transaction() as tx:
            check = LastCheck(product, uuid.UUID(server.other_project_id), utcnow(), 2, findings)
            await write_check(tx, check)
            await tx.commit()
    finally:
        await database.dispose()


async def test_an_operator_runs_a_project_in_the_console(
    browser: Browser, server: Server, person: Visitor
) -> None:
    page = person.page

    # 1. Signing in: a wrong password is refused, the right one lets the operator in.
    await go(page, f"{server.url}/console")
    await expect(page).to_have_url(f"{server.url}/console/login?next=/console")
    await expect(page).to_have_title("Sign in · Tessera console")
    email = page.get_by_label("Email")
    await expect(email).to_have_attribute("autocomplete", "username")
    await screenshot(page, "login")
    await email.click()
    await page.keyboard.type(OPERATOR_EMAIL)
    await page.keyboard.press("Tab")
    await expect(page.get_by_label("Password")).to_be_focused()
    await page.keyboard.type("not the password at all")
    await submit(page, "Enter", 401)
    await expect(page.get_by_role("alert")).to_have_text(
        "wrong email or password, or too many attempts: try again later"
    )
    await expect(email).to_have_value(OPERATOR_EMAIL)
    await screenshot(page, "login-refused")
    await page.get_by_label("Password").fill(OPERATOR_PASSWORD)
    await submit(page, "Enter", 303)
    await expect(page).to_have_url(f"{server.url}/console")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Projects")
    await expect(page.locator(".bar .who")).to_have_text(OPERATOR_EMAIL)
    # The stylesheets applied: the CSP lets the console's own CSS in.
    await expect(page.locator("header.bar")).to_have_css("display", "flex")
    await screenshot(page, "projects")

    # 2. A project: its credentials shown once; a write key for the API calls below.
    await page.get_by_label("Name").fill(PROJECT)
    await submit(page, page.get_by_role("button", name="Create the project"), 201)
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Project {PROJECT} created")
    await expect(page.get_by_text("Copy these now: they are shown this once")).to_be_visible()
    first_key = await secret(page, "Write API key")
    assert first_key.startswith("tsk_")
    assert await secret(page, "Token client id")
    assert await secret(page, "Token client secret")
    await screenshot(page, "project-created")
    await page.get_by_role("link", name="Continue").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(PROJECT)
    project_id = page.url.rsplit("/", 1)[1]
    assert page.url == f"{server.url}/console/projects/{project_id}"
    keys = page.get_by_role("table", name="API keys")
    await expect(keys.locator("tbody tr")).to_have_count(1)
    # Shown once: the project's page names the key by its prefix only.
    await expect(keys).to_contain_text(f"tsk_{first_key.split('_')[1]}_…")
    await expect(page.get_by_text(first_key)).to_have_count(0)
    key_form = form_with(page, "Create a key")
    await key_form.get_by_label("Name").fill("Setup script")
    await key_form.get_by_label("Permission").select_option("write")
    await submit(page, key_form.get_by_role("button", name="Create a key"), 201)
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"A write key for {PROJECT}")
    key = await secret(page, "API key")
    assert key.startswith("tsk_")
    await screenshot(page, "key-created")
    await page.get_by_role("link", name="Continue").click()
    await expect(keys.locator("tbody tr")).to_have_count(2)
    await expect(keys.get_by_role("row").filter(has_text="Setup script")).to_contain_text("write")
    await screenshot(page, "project")

    # What the console does not do: people, through the API with the new key.
    async with server.api(key) as api:
        created = await api.post("/v1/users/create", json=PEOPLE)
        assert created.status_code == 201, created.text

    # 3. An event (its times typed in UTC), then a product for it.
    await nav(page, "Events").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Events")
    await expect(page.get_by_text("No event yet.")).to_be_visible()
    await screenshot(page, "events-empty")
    await page.get_by_label("Name", exact=True).fill(FESTIVAL)
    await page.get_by_label("Start (UTC)").fill("2031-06-13T18:00")
    await page.get_by_label("End (UTC)").fill("2031-06-15T23:00")
    await page.get_by_label("Location").fill("Quay 4")
    await page.get_by_label("Address").fill("Harbour Road 1, Rotterdam")
    await submit(page, page.get_by_role("button", name="Create the event"), 303)
    await expect(page.get_by_role("status")).to_have_text("Event created.")
    await expect(page.get_by_role("heading", level=1)).to_have_text(FESTIVAL)
    await expect(page.locator("p.facts").first).to_contain_text(
        "2031-06-13 18:00 UTC to 2031-06-15 23:00 UTC · Quay 4, Harbour Road 1, Rotterdam"
    )
    await expect(page.get_by_text("No one is registered yet.")).to_be_visible()
    event_url = page.url.split("?")[0]
    await screenshot(page, "event")

    await nav(page, "Products").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Products")
    await expect(page.get_by_text("No product yet.")).to_be_visible()
    await screenshot(page, "products-empty")
    await page.get_by_label("Type").select_option("admission")
    await page.get_by_label("Name", exact=True).fill(PASS)
    await page.get_by_label("Event").select_option(label=FESTIVAL)
    await page.get_by_label("Description").fill("Every stage, Friday evening to Sunday night.")
    await page.get_by_label("Price").fill("45.00")
    await page.get_by_label("Stock").fill("100")
    await submit(page, page.get_by_role("button", name="Create the product"), 303)
    await expect(page.get_by_role("status")).to_have_text(f"Product {PASS} created.")
    await expect(page.get_by_role("heading", level=1)).to_have_text(PASS)
    await expect(page.locator("p.facts").first).to_contain_text(
        f"admission · price 45.00 · active · event {FESTIVAL}"
    )
    product_url = page.url.split("?")[0]
    product_id = product_url.rsplit("/", 1)[1]
    figures = page.locator("dl.figures")
    await expect(figures.locator("div").filter(has_text="Stock")).to_contain_text("100")
    await expect(figures.locator("div").filter(has_text="Issued")).to_contain_text("0")
    await expect(page.get_by_text("No sales yet")).to_be_visible()
    await expect(page.get_by_text("No item issued yet.")).to_be_visible()
    await screenshot(page, "product-new", full_page=True)

    # 4. Items issued to two people by email.
    await page.get_by_label("Users' emails").fill("ada@example.com\ngrace@example.com")
    await submit(page, page.get_by_role("button", name="Issue the items"), 303)
    await expect(page.get_by_role("status")).to_have_text("2 items issued.")
    items = page.get_by_role("table", name=f"Items of {PASS}")
    owners = [row[2] for row in await rows_of(items)]
    assert sorted(owners) == ["ada@example.com", "grace@example.com"]
    item_of = {row[2]: row[1] for row in await rows_of(items)}  # owner: item id
    number_of = {row[2]: row[0] for row in await rows_of(items)}  # owner: item number
    ada_item, grace_item = item_of["ada@example.com"], item_of["grace@example.com"]
    await screenshot(page, "product-items", full_page=True)

    # 5. Sales, ordered through the API: the chart and its table show them.
    orders = {}
    async with server.api(key) as api:
        for day, quantity in SALES.items():
            ordered = await api.post(
                "/v1/orders",
                json={
                    "user": {"email": "alan@example.com"},
                    "items": [{"product_id": product_id, "quantity": quantity}],
                    "status": "completed",
                },
            )
            assert ordered.status_code == 201, ordered.text
            orders[ordered.json()["id"]] = day
    await go(page, product_url)
    today = datetime.now(UTC).date().isoformat()
    chart = page.get_by_role("img")
    await expect(chart).to_have_attribute(
        "aria-label",
        f"Quantities sold per day from {today} to {today}: 14 in all, the most on {today} (14).",
    )
    sales = page.get_by_role("table", name="Quantities sold per day (UTC)")
    assert await rows_of(sales) == [[today, "14"]]
    await expect(figures.locator("div").filter(has_text="Issued")).to_contain_text("16")
    await expect(figures.locator("div").filter(has_text="Left")).to_contain_text("84")
    await date_sales(server, orders)
    await go(page, product_url)
    await expect(chart).to_have_attribute(
        "aria-label",
        "Quantities sold per day from 2030-05-27 to 2030-05-31: "
        "14 in all, the most on 2030-05-28 (5).",
    )
    await expect(chart.locator("rect")).to_have_count(5)  # a day without sales is a bar too
    assert await rows_of(sales) == [
        ["2030-05-27", "3"],
        ["2030-05-28", "5"],
        ["2030-05-29", "0"],
        ["2030-05-30", "2"],
        ["2030-05-31", "4"],
    ]
    await screenshot(page, "product", full_page=True)
    # The picture in docs/console.md: the page down to the sales table, the product's id (which
    # changes from run to run) masked.
    picture = await page.screenshot(
        clip=await down_to(sales),
        full_page=True,
        mask=[page.locator("p.facts code")],
        mask_color="#dfe4ea",
    )
    keep_picture(PRODUCT_PICTURE, picture)

    # 6. The door: a scanner types Ada's ticket's secret and Enter; a second scan; Grace by
    # her item's id, undone and checked in again by her email; someone unknown.
    async with server.api(key) as api:
        shown = await api.get(f"/v1/products/{product_id}/items/{ada_item}/ticket")
        assert shown.status_code == 200, shown.text
        ada_secret = shown.json()["secret"]
    await go(page, event_url)
    await page.get_by_role("link", name="Door view: check people in").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Door: {FESTIVAL}")
    who = page.get_by_label(DOOR_FIELD)
    await expect(who).to_be_focused()  # a scanner types at once
    await expect(page.get_by_text("No scan yet.")).to_be_visible()
    await screenshot(page, "door")
    await page.keyboard.type(ada_secret)  # as a keyboard-wedge scanner types it
    await submit(page, "Enter", 200)
    result = page.get_by_role("status")
    await expect(result.locator("p").first).to_have_text("OK")
    await expect(result).to_contain_text("Ada Lovelace (ada@example.com)")
    await expect(result).to_contain_text(f"{PASS}, item {number_of['ada@example.com']} · ")
    await expect(result).to_contain_text("0 of 1 use left")
    await expect(result).to_have_css("font-size", "40px")
    await expect(who).to_be_focused()
    await expect(who).to_have_value("")
    scans = page.get_by_role("table", name=f"Last scans at the door of {FESTIVAL}, newest first")
    await expect(scans.get_by_role("button", name="Undo")).to_have_count(1)
    await screenshot(page, "door-checked-in")
    # The picture in docs/console.md: the time of the scan (which changes from run to run) masked.
    picture = await page.screenshot(
        clip=await down_to(page.locator("main")),
        full_page=True,
        mask=[scans.locator("td:first-child")],
        mask_color="#dfe4ea",
    )
    keep_picture(DOOR_PICTURE, picture)
    await page.keyboard.type(ada_secret)
    await submit(page, "Enter", 409)
    again = page.get_by_role("alert")
    await expect(again.locator("p").first).to_contain_text("ALREADY CHECKED IN at ")
    await expect(again).to_contain_text("Ada Lovelace (ada@example.com)")
    await expect(again).to_have_css("font-size", "40px")
    await screenshot(page, "door-again")
    await page.keyboard.type(grace_item)
    await submit(page, "Enter", 200)
    await expect(result).to_contain_text("Grace Hopper (grace@example.com)")
    grace_row = scans.get_by_role("row").filter(has_text="Grace Hopper")
    await submit(page, grace_row.get_by_role("button", name="Undo"), 303)
    await expect(page.get_by_role("status")).to_contain_text("Check-in undone: Grace Hopper")
    await expect(grace_row).to_contain_text("OK, annulled at ")
    await expect(grace_row.get_by_role("button", name="Undo")).to_have_count(0)
    await screenshot(page, "door-undone")
    await who.click()
    await page.keyboard.type("grace@example.com")
    await submit(page, "Enter", 200)
    await expect(result.locator("p").first).to_have_text("OK")
    await expect(result).to_contain_text("Grace Hopper (grace@example.com)")
    await page.keyboard.type("nobody@example.com")
    await submit(page, "Enter", 404)
    refusal = page.get_by_role("alert")
    await expect(refusal.locator("p").first).to_have_text("UNKNOWN")
    await expect(refusal).to_contain_text(
        "No ticket of this event for this email, reference id or item id"
    )
    await expect(refusal).to_have_css("font-size", "40px")
    outcomes = [row[1] for row in await rows_of(scans)]
    assert outcomes[0] == "UNKNOWN" and outcomes[1] == "OK"
    assert outcomes[2].startswith("OK, annulled at ")
    assert outcomes[3].startswith("ALREADY CHECKED IN at ") and outcomes[4] == "OK"
    await screenshot(page, "door-unknown", full_page=True)
    await page.get_by_role("link", name="The event and its attendees").click()
    attendees = page.get_by_role("table", name=f"Attendees of {FESTIVAL}")
    await expect(page.get_by_text("2 registered, 2 checked in.")).to_be_visible()
    people = {row[0]: row[1:] for row in await rows_of(attendees)}
    assert people.keys() == {"ada@example.com", "grace@example.com"}
    assert [name for name, _registered, _checked_in in people.values()] == [
        "Ada Lovelace",
        "Grace Hopper",
    ]
    assert all(checked_in.endswith(" UTC") for *_, checked_in in people.values())
    await screenshot(page, "event-attendees")

    # 7. A failed chain job, with its error, retried.
    await failed_mint(server, project_id, ada_item)
    await nav(page, "Chain jobs").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Chain jobs")
    counts = page.get_by_role("table", name="Jobs by kind and status")
    # Queued, running, succeeded, failed: this job, and the other test's if it ran first.
    [queued, running, succeeded, failed] = await mint_counts(counts)
    assert [queued, running, succeeded] == [0, 0, 0] and failed >= 1
    job = page.get_by_role("row").filter(has_text=f"item:{ada_item}")
    await expect(job).to_contain_text("RuntimeError: boom")
    [cells] = [await job.locator("td").all_inner_texts()]
    assert [cell.strip() for cell in cells[:5]] == [
        PROJECT,
        JobKind.MINT,
        f"item:{ada_item}",
        "failed",
        "8",
    ]
    await screenshot(page, "jobs-failed", full_page=True)
    await submit(page, job.get_by_role("button", name="Retry"), 303)
    await expect(page.get_by_role("status")).to_have_text("Job queued again.")
    cells = await job.locator("td").all_inner_texts()
    assert [cell.strip() for cell in cells[3:5]] == ["queued", "0"]
    await expect(job).not_to_contain_text("boom")
    await expect(job.get_by_role("button", name="Retry")).to_have_count(0)
    assert await mint_counts(counts) == [1, 0, 0, failed - 1]
    await screenshot(page, "jobs-retried", full_page=True)

    # 8. A form whose CSRF token is not the session's is refused, and changes nothing.
    await nav(page, "Projects").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Projects")
    await page.evaluate(
        "document.querySelector('form[action=\"/console/projects\"] input[name=csrf]')"
        ".value = 'forged'"
    )
    await page.get_by_label("Name").fill("Forged project")
    await submit(page, page.get_by_role("button", name="Create the project"), 403)
    problem = page.get_by_role("alert")
    await expect(problem.get_by_role("heading", level=1)).to_have_text("That did not work")
    await expect(problem).to_contain_text("this form is stale or was not sent by the console")
    await screenshot(page, "csrf-refused")
    await go(page, f"{server.url}/console")
    projects = await rows_of(page.get_by_role("table", name="Projects"))
    assert sorted(row[0] for row in projects) == [PROJECT, "Other"]

    # 9. The owner of another project signs in with its write key: this project is not there.
    owner = await visitor(browser)
    try:
        theirs = owner.page
        await go(theirs, f"{server.url}/console/login")
        await theirs.get_by_label("Write API key").fill(server.other_key)
        await submit(theirs, theirs.get_by_role("button", name="Sign in with the key"), 303)
        await expect(theirs).to_have_url(f"{server.url}/console/projects/{server.other_project_id}")
        await expect(theirs.get_by_role("heading", level=1)).to_have_text("Other")
        await expect(nav(theirs, "Projects")).to_have_count(0)
        await screenshot(theirs, "owner-project")
        for path in ("", "/events", f"/products/{product_id}"):
            await go(theirs, f"{server.url}/console/projects/{project_id}{path}", 404)
            await expect(theirs.get_by_role("alert")).to_contain_text("page not found")
            await expect(theirs.get_by_text(PROJECT)).to_have_count(0)
        await screenshot(theirs, "owner-not-found")
        await nav(theirs, "Chain jobs").click()
        await expect(theirs.get_by_role("heading", level=1)).to_have_text("Chain jobs")
        await expect(theirs.get_by_text(f"item:{ada_item}")).to_have_count(0)
        await screenshot(theirs, "owner-jobs")
    finally:
        await leave(owner, server)

    # 10. Signing out: the sign-in page, and the console asks to sign in again.
    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(f"{server.url}/console/login?notice=Signed%20out.")
    await expect(page.get_by_role("status")).to_have_text("Signed out.")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    await expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    await screenshot(page, "signed-out")
    await go(page, f"{server.url}/console")
    await expect(page).to_have_url(f"{server.url}/console/login?next=/console")


async def test_axe_finds_nothing_serious(
    browser: Browser, server: Server, axe_script: Path
) -> None:
    # Its own data, in the second project: this test does not depend on the other one.
    async with server.api(server.other_key) as api:
        people = [{"email": "lin@example.com", "firstName": "Lin", "lastName": "Wei"}]
        assert (await api.post("/v1/users/create", json=people)).status_code == 201
        event = await api.post(
            "/v1/events/create",
            json={
                "name": "Axe Night",
                "location": "Hall 2",
                "address": "Main Street 3",
                "start_date": 1938000000,
                "end_date": 1938010000,
            },
        )
        assert event.status_code == 201, event.text
        product = await api.post(
            "/v1/products",
            json={"type": "admission", "name": "Axe pass", "event_id": event.json()["id"]},
        )
        assert product.status_code == 201, product.text
        order = await api.post(
            "/v1/orders",
            json={
                "user": {"email": "lin@example.com"},
                "items": [{"product_id": product.json()["id"], "quantity": 2}],
            },
        )
        assert order.status_code == 201, order.text
        item_id = order.json()["product_items"][0]["id"]
        shown = await api.get(f"/v1/products/{product.json()['id']}/items/{item_id}/ticket")
        assert shown.status_code == 200, shown.text
        lins_secret = shown.json()["secret"]
    await failed_mint(server, server.other_project_id, item_id)
    project = f"{server.url}/console/projects/{server.other_project_id}"
    event_page = f"{project}/events/{event.json()['id']}"

    # axe is injected as an inline script, which the pages' CSP forbids: this context alone
    # sets the CSP aside (the main flow runs under it).
    visit = await visitor(browser, bypass_csp=True)
    page = visit.page
    found: dict[str, list[str]] = {}
    try:
        await go(page, f"{server.url}/console/login")
        found["sign-in"] = await serious_violations(page, axe_script)
        await page.get_by_label("Password").fill("wrong, wrong, wrong")
        await page.get_by_label("Email").fill(OPERATOR_EMAIL)
        await submit(page, "Enter", 401)
        found["sign-in refused"] = await serious_violations(page, axe_script)
        await sign_in(page, server)
        found["projects"] = await serious_violations(page, axe_script)
        pages = {
            "project": project,
            "events": f"{project}/events",
            "event": event_page,
            "products": f"{project}/products",
            "product with a chart": f"{project}/products/{product.json()['id']}",
            "users": f"{project}/users",
            "jobs": f"{server.url}/console/jobs",
            "webhooks": f"{project}/webhooks",
            "changes": f"{project}/changes",
        }
        for name, url in pages.items():
            await go(page, url)
            if name == "product with a chart":
                await expect(page.get_by_role("img")).to_be_visible()
            await screenshot(page, f"other-{name.replace(' ', '-')}", full_page=True)
            found[name] = await serious_violations(page, axe_script)
        await go(page, f"{project}/users")
        await page.get_by_role("link", name="lin@example.com").click()
        await expect(page.get_by_role("heading", level=1)).to_have_text("lin@example.com")
        await screenshot(page, "other-user-profile")
        found["user profile"] = await serious_violations(page, axe_script)
        await go(page, f"{event_page}/door")
        found["door"] = await serious_violations(page, axe_script)
        # A scanner types the secret into the focused field and presses Enter.
        await expect(page.get_by_label(DOOR_FIELD)).to_be_focused()
        await page.keyboard.type(lins_secret)
        await submit(page, "Enter", 200)
        await expect(page.get_by_role("status").locator("p").first).to_have_text("OK")
        found["door, checked in"] = await serious_violations(page, axe_script)
        await page.get_by_label(DOOR_FIELD).fill(lins_secret)
        await submit(page, "Enter", 409)
        await expect(page.get_by_role("alert")).to_contain_text("ALREADY CHECKED IN at ")
        found["door, already checked in"] = await serious_violations(page, axe_script)
        await page.get_by_label(DOOR_FIELD).fill("nobody@example.com")
        await submit(page, "Enter", 404)
        await expect(page.get_by_role("alert")).to_contain_text("UNKNOWN")
        found["door, refused"] = await serious_violations(page, axe_script)
        await submit(page, page.get_by_role("button", name="Undo"), 303)
        await expect(page.get_by_role("status")).to_contain_text("Check-in undone: Lin Wei")
        found["door, undone"] = await serious_violations(page, axe_script)
        await go(page, f"{server.url}/console/projects/{uuid.uuid4()}", 404)
        found["not found"] = await serious_violations(page, axe_script)
    finally:
        assert visit.context is not None
        await visit.context.close()
    assert found == {name: [] for name in found}
    assert len(found) == 19


async def test_a_products_drift_is_shown_and_axe_finds_nothing_serious(
    browser: Browser, server: Server, person: Visitor, axe_script: Path
) -> None:
    # Its own data, in the second project: this test does not depend on the others.
    async with server.api(server.other_key) as api:
        people = [
            {"email": f"{name}@drift.example", "firstName": name, "lastName": "Drift"}
            for name in ("kim", "lou")
        ]
        created = await api.post("/v1/users/create", json=people)
        assert created.status_code == 201, created.text
        kim, lou = created.json()["users"]
        product = await api.post("/v1/products", json={"type": "admission", "name": "Drift pass"})
        assert product.status_code == 201, product.text
        product_id = product.json()["id"]
        issued = await api.post(
            f"/v1/products/{product_id}/items", json={"users": [kim["id"], lou["id"]]}
        )
        assert issued.status_code == 201, issued.text
    stranger = "5C4iA2und8WV6mbvTBYupm2eZwtxk3wCYUM2SFHXSyQuapGp"
    kim_wallet = kim["wallets"][0]["address"]
    await drifted(
        server,
        product_id,
        [
            {
                "kind": "missing_on_chain",
                "item_id": 1,
                "database": {"nft_status": "minted", "user_id": kim["id"], "wallet": kim_wallet},
                "chain": None,
            },
            {
                "kind": "owner_mismatch",
                "item_id": 2,
                "database": {"user_id": lou["id"], "wallet": lou["wallets"][0]["address"]},
                "chain": {"owner": stranger, "user_id": None},
            },
            {
                "kind": "unexpected_on_chain",
                "item_id": 9,
                "database": None,
                "chain": {"owner": stranger, "user_id": None, "metadata": None},
            },
        ],
    )
    product_url = f"{server.url}/console/projects/{server.other_project_id}/products/{product_id}"

    # Under the pages' CSP: the findings, and a check the server cannot run (no such chain).
    page = person.page
    await sign_in(page, server)
    await go(page, product_url)
    await expect(page.locator("p.facts").last).to_contain_text("· 2 items checked · collection 7")
    findings = page.get_by_role("table", name="3 findings: where the database and the chain")
    assert await rows_of(findings) == [
        [
            "missing_on_chain",
            "1",
            f"nft status: minted\nuser id: {kim['id']}\nwallet: {kim_wallet}",
            "nothing",
        ],
        [
            "owner_mismatch",
            "2",
            f"user id: {lou['id']}\nwallet: {lou['wallets'][0]['address']}",
            f"owner: {stranger}\nuser id: none",
        ],
        [
            "unexpected_on_chain",
            "9",
            "nothing",
            f"owner: {stranger}\nuser id: none\nmetadata: none",
        ],
    ]
    await expect(page.get_by_role("button", name="Repair")).to_be_visible()
    await screenshot(page, "product-drift", full_page=True)
    await submit(page, page.get_by_role("button", name="Check now"), 409)
    problem = page.get_by_role("alert")
    await expect(problem.get_by_role("heading", level=1)).to_have_text("The chain was not checked")
    await expect(problem).to_contain_text(
        "chain AssetHub is not configured: set TESSERA_CHAIN_ASSETHUB_RPC_URL"
    )
    await screenshot(page, "product-drift-unchecked")
    await page.get_by_role("link", name="Back").click()
    await expect(findings.locator("tbody tr")).to_have_count(3)  # the last check stays shown

    # axe, in a context of its own that sets the CSP aside (axe is an inline script).
    visit = await visitor(browser, bypass_csp=True)
    found: dict[str, list[str]] = {}
    try:
        await sign_in(visit.page, server)
        await go(visit.page, product_url)
        await expect(visit.page.get_by_role("table", name=re.compile("3 findings"))).to_be_visible()
        found["product with findings"] = await serious_violations(visit.page, axe_script)
        await submit(visit.page, visit.page.get_by_role("button", name="Repair"), 409)
        await expect(visit.page.get_by_role("alert")).to_contain_text("Nothing was repaired")
        found["repair refused"] = await serious_violations(visit.page, axe_script)
    finally:
        assert visit.context is not None
        await visit.context.close()
    assert found == {"product with findings": [], "repair refused": []}
