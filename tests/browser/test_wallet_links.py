"""The ticket page's wallet links on a phone: a real browser (headless Chromium) on a real
``tessera serve`` configured for both wallets (files of the CA standing in for Apple, made in
this run). The page shows both links and still fits the screen; "Add to Apple Wallet" downloads
``ticket.pkpass``, whose signature OpenSSL accepts and whose code is the ticket's secret; "Add
to Google Wallet" answers 303 to Google's save page (followed no further: tests reach no
network). axe-core finds nothing serious or critical."""

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.browser.test_claim_page import FESTIVAL, Person, Server, serious_violations
from tests.browser.test_ticket_page import PHONE, fits_the_screen, ticket_of
from tests.conftest import BACKEND
from tests.passes.ca import StandInCa
from tests.passes.pkpass import opened
from tests.serving import fresh_database, serve, settings_env, tessera

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> StandInCa:
    return StandInCa.make(tmp_path_factory.mktemp("browser_wallet_ca"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, ca: StandInCa) -> Iterator[Server]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    directory = tmp_path_factory.mktemp("browser_wallets")
    env = settings_env(
        fresh_database(BACKEND, directory, f"browser_wallets_{worker}"),
        worker_in_process=False,
        **ca.settings(),
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


async def held_ticket(server: Server) -> dict:
    link = await server.claim_link(event=FESTIVAL, max_claims=10)
    async with server.api() as api:
        claimed = await api.post(
            f"/v1/claims/{link['token']}", json={"email": "ada@example.com", "firstName": "Ada"}
        )
        assert claimed.status_code == 201, claimed.text
    return await ticket_of(server, link["product_id"], claimed.json()["product_item"]["item_id"])


async def test_the_wallet_links_on_a_phone(
    person: Person, server: Server, ca: StandInCa, tmp_path: Path
) -> None:
    ticket = await held_ticket(server)
    page = person.page
    await page.goto(ticket["url"])
    apple = page.get_by_role("link", name="Add to Apple Wallet")
    google = page.get_by_role("link", name="Add to Google Wallet")
    await expect(apple).to_be_visible()
    await expect(google).to_be_visible()
    await fits_the_screen(page)

    async with page.expect_download() as downloading:
        await apple.click()
    download = await downloading.value
    assert download.suggested_filename == "ticket.pkpass"
    saved = await download.path()
    content = opened(await asyncio.to_thread(saved.read_bytes), ca, tmp_path)
    assert content["barcodes"][0]["message"] == ticket["secret"]
    assert content["webServiceURL"] == f"{server.url}/passkit"

    href = await google.get_attribute("href")
    assert href is not None and href.endswith("/google-wallet")
    answer = await page.request.get(f"{ticket['url']}/google-wallet", max_redirects=0)
    assert answer.status == 303
    assert answer.headers["location"].startswith("https://pay.google.com/gp/v/save/")


async def test_axe_finds_nothing_serious(
    browser: Browser, server: Server, axe_script: Path
) -> None:
    context = await browser.new_context(**PHONE, bypass_csp=True)
    page = await context.new_page()
    try:
        ticket = await held_ticket(server)
        await page.goto(ticket["url"])
        await expect(page.get_by_role("link", name="Add to Apple Wallet")).to_be_visible()
        assert await serious_violations(page, axe_script) == []
    finally:
        await context.close()
