"""Email as an organizer sees it: a real ``tessera serve`` (its in-process worker sending to a
real SMTP server on 127.0.0.1) and headless Chromium. The project page's button switches ticket
email on; an item issued through the API is emailed; the Email page shows the mail, and with
the SMTP server down the mail waiting with its error, until the server is back and the mail
arrives once. The ticket link in the email opens its page in the browser; axe-core finds
nothing serious on the pages.
"""

import asyncio
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from tests.browser.test_claim_page import serious_violations
from tests.conftest import BACKEND
from tests.mail.conftest import MAIL_FROM, MailServer
from tests.serving import ROOT, fresh_database, serve, settings_env, tessera

pytestmark = pytest.mark.browser

SCREENSHOTS = ROOT / "artifacts" / "screenshots"
OPERATOR_EMAIL = "mail-ops@example.com"
OPERATOR_PASSWORD = "correct horse battery staple"


@dataclass
class Server:
    url: str
    project_id: str
    key: str
    smtp: MailServer

    def api(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"x-api-key": self.key})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    directory = tmp_path_factory.mktemp("mail")
    url = fresh_database(BACKEND, directory, f"mail_{worker}")
    smtp = MailServer()
    env = settings_env(
        url,
        smtp_url=smtp.url(),
        mail_from=MAIL_FROM,
        worker_poll_seconds=0.1,
    )
    operator = env | {"TESSERA_OPERATOR_PASSWORD": OPERATOR_PASSWORD}
    project = tessera("project", "create", "--name", "Harbour Lights", env=env)
    tessera("operator", "create", "--email", OPERATOR_EMAIL, env=operator)
    try:
        with serve(env, directory / "server.log") as served:
            yield Server(served, str(project["project_id"]), project["api_key"], smtp)
    finally:
        smtp.close()


async def go(page: Page, url: str, status: int = 200) -> None:
    response = await page.goto(url)
    assert response is not None and response.status == status


async def click_and_load(page: Page, name: str) -> None:
    async with page.expect_event("load"):
        async with page.expect_response(lambda r: r.request.method == "POST") as posted:
            await page.get_by_role("button", name=name).click()
    assert (await posted.value).status == 303


async def until(check, within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.1)


async def issue_one(server: Server, email: str) -> None:
    async with server.api() as api:
        user = await api.post("/v1/users/create", json=[{"email": email, "firstName": "Ada"}])
        assert user.status_code == 201, user.text
        product = await api.post("/v1/products", json={"type": "admission", "name": "Gala"})
        assert product.status_code == 201, product.text
        issued = await api.post(
            f"/v1/products/{product.json()['id']}/items",
            json={"users": [user.json()["users"][0]["id"]]},
        )
        assert issued.status_code == 201, issued.text


async def test_an_organizer_turns_ticket_email_on_and_follows_the_mail(
    browser: Browser, server: Server, axe_script: Path
) -> None:
    # axe is injected as an inline script, which the pages' CSP forbids: this context alone
    # sets the CSP aside.
    context = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
    page = await context.new_page()
    found: dict[str, list[str]] = {}
    project = f"{server.url}/console/projects/{server.project_id}"
    try:
        await go(page, f"{server.url}/console/login")
        await page.get_by_label("Email").fill(OPERATOR_EMAIL)
        await page.get_by_label("Password").fill(OPERATOR_PASSWORD)
        async with page.expect_event("load"):
            await page.get_by_role("button", name="Sign in", exact=True).click()
        await go(page, project)
        await expect(page.get_by_text("Ticket email is off")).to_be_visible()
        found["project, email off"] = await serious_violations(page, axe_script)
        await click_and_load(page, "Turn ticket email on")
        await expect(page.get_by_role("status")).to_have_text("Ticket email is on.")
        await expect(page.get_by_text("Ticket email is on: a user")).to_be_visible()
        await expect(page.get_by_role("button", name="Turn ticket email off")).to_be_visible()
        found["project, email on"] = await serious_violations(page, axe_script)

        await issue_one(server, "ada@example.com")
        await until(lambda: len(server.smtp.received) == 1)
        [mail] = server.smtp.received
        assert mail.to == "ada@example.com" and mail.subject == "Your ticket for Gala"
        [link] = [w for w in mail.text.split() if "/tickets/" in w and not w.endswith(".pdf")]
        assert link.startswith(f"{server.url}/tickets/")

        await (
            page.get_by_role("navigation", name="Sections")
            .get_by_role("link", name="Email")
            .click()
        )
        await expect(page.get_by_role("heading", level=1)).to_have_text("Email of Harbour Lights")
        row = page.get_by_role("row").filter(has_text="ada@example.com")
        await expect(row).to_contain_text("Your ticket for Gala")
        await expect(row.get_by_role("cell").nth(2)).to_have_text("sent")
        found["email page"] = await serious_violations(page, axe_script)

        server.smtp.stop()
        await issue_one(server, "bob@example.com")
        bob = page.get_by_role("row").filter(has_text="bob@example.com")
        deadline = time.monotonic() + 15
        while True:  # until the worker's first attempt failed
            await page.reload()
            if "SMTPConnectError" in await page.content():
                break
            assert time.monotonic() < deadline, "the failed attempt is not shown"
            await asyncio.sleep(0.2)
        await expect(bob.get_by_role("cell").nth(2)).to_have_text("queued")
        await expect(bob.get_by_role("cell").nth(3)).to_have_text("1")
        await page.screenshot(path=_screenshot("email"), full_page=True)
        found["email page, a mail waiting"] = await serious_violations(page, axe_script)
        assert "/tickets/" not in await page.content()

        server.smtp.start()
        await until(lambda: len(server.smtp.received) == 2)
        await asyncio.sleep(1.0)  # and no second copy
        assert [received.to for received in server.smtp.received] == [
            "ada@example.com",
            "bob@example.com",
        ]
        await page.reload()
        await expect(bob.get_by_role("cell").nth(2)).to_have_text("sent")

        await go(page, link)
        await expect(page.get_by_role("heading", level=1)).to_contain_text("Gala")
    finally:
        await context.close()
    assert found == {name: [] for name in found}
    assert len(found) == 4


def _screenshot(name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"console-{name}.png"
