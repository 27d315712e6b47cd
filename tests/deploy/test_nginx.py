"""Tessera behind nginx as docs/deploy.md sets it up: Debian's nginx serving deploy/nginx.conf
(only what the page says to change, changed) with a throwaway certificate, in front of
``tessera serve`` (two processes on PostgreSQL, one on SQLite) with
``TESSERA_PUBLIC_URL=https://...`` and ``TESSERA_FORWARDED_ALLOW_IPS=127.0.0.1``.

Over HTTPS the API answers and HTTP is sent there; tickets, passes and emails carry the https
public URL; clients behind the proxy are rate-limited by their own addresses, and one that
talks to Tessera directly cannot choose its address with ``X-Forwarded-For``; the console's
cookie is ``Secure``; the door's service worker registers in Chromium over HTTPS under a
real host name (not ``localhost``, which browsers trust over plain HTTP too).

Each client comes from an address of its own on 127.0.0.0/8 (a socket bound to it): nginx sees
127.0.0.3 and 127.0.0.4, Tessera sees nginx at 127.0.0.1 and the direct client at 127.0.0.2.
"""

import asyncio
import io
import json
import os
import re
import ssl
import subprocess
import time
import uuid
import zipfile
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from bench.mailbox import Mailbox
from playwright.async_api import async_playwright

from tests.browser.conftest import CHROMIUM_ARGS, chromium  # noqa: F401 - a fixture
from tests.conftest import BACKEND
from tests.deploy.conftest import HOST, Certificate, nginx_main, nginx_site, program
from tests.passes.ca import StandInCa
from tests.serving import free_port, fresh_database, serve, settings_env, tessera

CLAIMS_PER_ADDRESS = 3
OPERATOR_EMAIL = "ops@tickets.test"
OPERATOR_PASSWORD = "a long operator passphrase"


@dataclass(frozen=True)
class Stack:
    https: str  # https://tickets.test:PORT, the public URL
    http_port: int
    https_port: int
    upstream: str  # Tessera itself, http://127.0.0.1:PORT
    certificate: Certificate
    api_key: str
    mailbox: Mailbox

    def client(self, address: str, **options: Any) -> httpx.AsyncClient:
        """A client from ``address`` to nginx over HTTPS, trusting the throwaway CA only, asking
        for the public host name (the certificate names 127.0.0.1 too)."""
        trusted = ssl.create_default_context(cafile=self.certificate.ca)
        transport = httpx.AsyncHTTPTransport(local_address=address, verify=trusted)
        return httpx.AsyncClient(
            transport=transport,
            base_url=f"https://127.0.0.1:{self.https_port}",
            headers={"host": f"{HOST}:{self.https_port}", **options.pop("headers", {})},
            timeout=30,
            **options,
        )

    def local(self, url: str) -> str:
        """A public URL as a test reaches it (127.0.0.1, which the certificate names too)."""
        assert url.startswith(self.https + "/"), url
        return url.removeprefix(self.https)


@contextmanager
def nginx(directory: Path, site: str) -> Iterator[None]:
    binary = program("/usr/sbin/nginx", "nginx")
    directory.mkdir()
    (directory / "site.conf").write_text(site, encoding="utf-8")
    main = directory / "nginx.conf"
    main.write_text(nginx_main(directory, directory / "site.conf"), encoding="utf-8")
    command = [str(binary), "-p", str(directory), "-c", str(main), "-e", "stderr"]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=10)
        assert b"[emerg]" not in errors, errors.decode()


def wait_for(url: str, *, verify: ssl.SSLContext) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(url, verify=verify, timeout=2, headers={"host": HOST})
            return
        except httpx.TransportError:
            assert time.monotonic() < deadline, f"nothing answers at {url}"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    program("/usr/sbin/nginx", "nginx")
    directory = tmp_path_factory.mktemp("deploy")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    certificate = Certificate.make(directory)
    http_port, https_port = free_port(), free_port()
    public = f"https://{HOST}:{https_port}"
    (directory / "wallet").mkdir()
    wallets = StandInCa.make(directory / "wallet").settings()
    with Mailbox() as mailbox:
        env = settings_env(
            fresh_database(BACKEND, directory, f"deploy_{worker}"),
            public_url=public,
            forwarded_allow_ips="127.0.0.1",
            claim_rate_per_address=CLAIMS_PER_ADDRESS,
            smtp_url=mailbox.url,
            mail_from="Tickets <tickets@tickets.test>",
            worker_poll_seconds=0.2,
            **wallets,
        )
        operator = env | {"TESSERA_OPERATOR_PASSWORD": OPERATOR_PASSWORD}
        with ThreadPoolExecutor(2) as pool:
            created = pool.submit(tessera, "project", "create", "--name", "Quayside", env=env)
            pool.submit(tessera, "operator", "create", "--email", OPERATOR_EMAIL, env=operator)
            workers = "2" if BACKEND == "postgresql" else "1"
            with serve(env, directory / "server.log", "--workers", workers) as upstream:
                project = created.result()
                tessera(
                    "project", "set", "--project", project["project_id"], "--ticket-emails", env=env
                )
                site = nginx_site(
                    http_port=http_port,
                    https_port=https_port,
                    upstream=int(upstream.rsplit(":", 1)[1]),
                    certificate=certificate,
                    webroot=directory,
                )
                with nginx(directory / "nginx", site):
                    wait_for(
                        f"https://127.0.0.1:{https_port}/v1/version",
                        verify=ssl.create_default_context(cafile=certificate.ca),
                    )
                    yield Stack(
                        public,
                        http_port,
                        https_port,
                        upstream,
                        certificate,
                        project["api_key"],
                        mailbox,
                    )


async def test_http_is_sent_to_https(stack: Stack) -> None:
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.3")
    async with httpx.AsyncClient(transport=transport) as plain:
        answer = await plain.get(
            f"http://127.0.0.1:{stack.http_port}/v1/version?x=1", headers={"host": HOST}
        )
    assert answer.status_code == 301
    assert answer.headers["location"] == f"https://{HOST}/v1/version?x=1"


async def test_the_api_answers_over_https(stack: Stack) -> None:
    async with stack.client("127.0.0.3") as api:
        version = await api.get("/v1/version")
        assert version.status_code == 200, version.text
        assert version.headers["strict-transport-security"] == "max-age=63072000"
        ready = await api.get("/v1/health/ready")
        assert ready.status_code == 200, ready.text
        # A client's request id reaches Tessera's answer; without one, nginx's own is used.
        asked = await api.get("/v1/version", headers={"x-request-id": "door-7"})
        assert asked.headers["x-request-id"] == "door-7"
        assert re.fullmatch(r"[0-9a-f]{32}", version.headers["x-request-id"])


async def test_the_body_limit_is_tesseras_own(stack: Stack) -> None:
    """nginx lets through what Tessera takes (TESSERA_MAX_BODY_BYTES, 8 MiB): a body just under
    it reaches Tessera, and one over it gets Tessera's 413 in its own shape, not nginx's page."""
    key = {"x-api-key": stack.api_key}
    async with stack.client("127.0.0.3", headers=key) as api:
        under = await api.post(
            "/v1/users/create", content=b"[" + b" " * (8 * 1024 * 1024 - 8) + b"]"
        )
        assert under.status_code == 400, under.text
        assert under.headers["content-type"] == "application/json"
        over = await api.post(
            "/v1/users/create", content=b"[" + b" " * (8 * 1024 * 1024 + 8) + b"]"
        )
        assert over.status_code == 413, over.text
        assert over.json() == {"message": "request body too large (limit 8388608 bytes)"}


async def test_tickets_passes_and_emails_carry_the_public_https_url(stack: Stack) -> None:
    key = {"x-api-key": stack.api_key}
    async with stack.client("127.0.0.3", headers=key) as api:

        async def created(path: str, body: object) -> Any:
            answer = await api.post(path, json=body)
            assert answer.status_code in (200, 201), answer.text
            return answer.json()

        event = await created(
            "/v1/events/create",
            {
                "name": "Quayside",
                "location": "Pier 2",
                "address": "Harbour Road 9",
                "start_date": 1_900_000_000,
                "end_date": 1_900_010_000,
            },
        )
        product = await created(
            "/v1/products",
            {"type": "admission", "name": "Deck pass", "event_id": event["id"], "stock": 10},
        )
        email = f"deck-{uuid.uuid4().hex[:8]}@tickets.test"
        [user] = (await created("/v1/users/create", [{"email": email}]))["users"]
        order = await created(
            "/v1/orders",
            {"user": {"id": user["id"]}, "items": [{"product_id": product["id"], "quantity": 1}]},
        )
        [item] = order["product_items"]
        ticket = (await api.get(f"/v1/products/{product['id']}/items/{item['id']}/ticket")).json()
        assert ticket["url"].startswith(f"{stack.https}/tickets/"), ticket

        page = await api.get(stack.local(ticket["url"]))
        assert page.status_code == 200
        assert "pass.pkpass" in page.text
        pkpass = await api.get(stack.local(ticket["url"]) + "/pass.pkpass")
        assert pkpass.status_code == 200, pkpass.text
        with zipfile.ZipFile(io.BytesIO(pkpass.content)) as archive:
            content = json.loads(archive.read("pass.json"))
        assert content["webServiceURL"] == f"{stack.https}/passkit"

    deadline = time.monotonic() + 30
    while not (letters := [m for m in stack.mailbox.letters() if m.to == email]):
        assert time.monotonic() < deadline, "no ticket email within 30 s"
        await asyncio.sleep(0.2)
    [letter] = letters
    [mailed] = letter.tickets
    assert mailed.page == ticket["url"]
    assert mailed.pdf == f"{ticket['url']}/ticket.pdf"
    async with stack.client("127.0.0.3") as browser:
        pdf = await browser.get(stack.local(mailed.pdf))
        assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")


async def claim_attempts(client: httpx.AsyncClient, count: int, **headers: str) -> list[int]:
    """Claims through links that do not exist, each a different one: only the limit per
    address can refuse them (404 until it does, then 429)."""
    statuses = []
    for _ in range(count):
        answer = await client.post(
            f"/v1/claims/tcl_{uuid.uuid4().hex}",
            json={"email": "someone@tickets.test"},
            headers=headers,
        )
        statuses.append(answer.status_code)
    return statuses


async def test_clients_behind_the_proxy_are_limited_by_their_own_addresses(stack: Stack) -> None:
    limit = CLAIMS_PER_ADDRESS
    async with stack.client("127.0.0.4") as first, stack.client("127.0.0.5") as second:
        # The first client names another address: nginx replaces it with the real one.
        assert await claim_attempts(first, limit + 1, **{"x-forwarded-for": "127.0.0.5"}) == [
            *[404] * limit,
            429,
        ]
        assert await claim_attempts(second, limit) == [404] * limit
        assert await claim_attempts(second, 1) == [429]


async def test_a_client_talking_to_tessera_directly_cannot_choose_its_address(
    stack: Stack,
) -> None:
    """127.0.0.2 is not a proxy Tessera believes: its X-Forwarded-For is not its address."""
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(transport=transport, base_url=stack.upstream) as direct:
        forged = [{"x-forwarded-for": f"203.0.113.{n}"} for n in range(CLAIMS_PER_ADDRESS + 1)]
        statuses = [(await claim_attempts(direct, 1, **headers))[0] for headers in forged]
    assert statuses == [*[404] * CLAIMS_PER_ADDRESS, 429]


async def test_the_consoles_cookie_is_secure(stack: Stack) -> None:
    async with stack.client("127.0.0.6") as browser:
        answer = await browser.post(
            "/console/login",
            data={"email": OPERATOR_EMAIL, "password": OPERATOR_PASSWORD, "next": "/console"},
        )
    assert answer.status_code == 303, answer.text
    cookie = answer.headers["set-cookie"]
    assert "; Secure" in cookie and "; HttpOnly" in cookie, cookie


@asynccontextmanager
async def chromium_trusting(certificate: Certificate, binary: Path) -> AsyncIterator[Any]:
    """Debian's Chromium that finds tickets.test at 127.0.0.1 and trusts this certificate
    (by its key: --ignore-certificate-errors-spki-list), and no other."""
    args = [
        *CHROMIUM_ARGS,
        f"--host-resolver-rules=MAP {HOST} 127.0.0.1",
        f"--ignore-certificate-errors-spki-list={certificate.spki_sha256}",
    ]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=binary, args=args)
        try:
            yield browser
        finally:
            await browser.close()


async def test_the_doors_service_worker_registers_over_https(
    stack: Stack,
    chromium: Path,  # noqa: F811 - the fixture
) -> None:
    async with chromium_trusting(stack.certificate, chromium) as browser:
        page = await browser.new_page()
        response = await page.goto(f"{stack.https}/scan")
        assert response is not None and response.status == 200
        assert await page.evaluate("window.isSecureContext") is True
        scope = await page.evaluate(
            "navigator.serviceWorker.ready.then((registration) => registration.scope)"
        )
        assert scope == f"{stack.https}/scan"
        await page.reload()
        assert await page.evaluate("navigator.serviceWorker.controller !== null") is True
        assert await page.locator("#page-problem").is_hidden()
