"""Email against a real SMTP server on 127.0.0.1 (aiosmtpd, in a thread of its own).

``mail_app`` is the app with ``TESSERA_SMTP_URL`` pointing at ``smtp``, which records every
message it takes and answers what a test sets (250, a 4xx, a 5xx) or is down. ``postman``
sends the due mails with tiny retry delays; ``send_until`` runs its rounds until the server
has what a test waits for. Ticket email is switched on per project (``emails_on``).
"""

import asyncio
import email
import inspect
import ipaddress
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.policy import default
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import select

from tessera.config import Settings
from tessera.db import Database, database_of
from tessera.mail.sender import Postman
from tessera.main import create_app, pdfs_of
from tessera.models import Mail
from tessera.projects.service import set_project_rules
from tessera.toolkit.smtp_url import parse_smtp_url
from tests import orm
from tests.factories import Tenant

MAIL_FROM = "Tessera Tickets <tickets@tessera.test>"
SMTP_USER = "tessera"
SMTP_PASSWORD = "s3cret-smtp-p4ssw0rd"
# A ticket's page, and its PDF (``{page}/ticket.pdf``), which the page link is not.
TICKET_LINK = re.compile(r"http://tessera\.test/tickets/[A-Za-z0-9_-]{43}(?![A-Za-z0-9_/-])")
PDF_LINK = re.compile(r"http://tessera\.test/tickets/[A-Za-z0-9_-]{43}/ticket\.pdf")
CLAIM_LINK = re.compile(r"http://tessera\.test/claim/tcl_[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Received:
    """A message the server took: its envelope and the message parsed."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    @property
    def to(self) -> str:
        return self.rcpt_tos[0]

    @property
    def subject(self) -> str:
        return str(self.message["subject"])

    def body(self, subtype: str) -> str:
        part = self.message.get_body(preferencelist=(subtype,))
        assert part is not None, f"no text/{subtype} part"
        return str(part.get_content())

    @property
    def text(self) -> str:
        return self.body("plain")

    @property
    def html(self) -> str:
        return self.body("html")

    def links(self, pattern: re.Pattern[str] = TICKET_LINK) -> list[str]:
        """The links of the plain text, which the HTML must have too, in the same order."""
        found = pattern.findall(self.text)
        assert re.findall(pattern, self.html.replace("&amp;", "&")) == found
        return found

    def attachments(self) -> list[tuple[str, str, bytes]]:
        """The attached files: name, content type, bytes."""
        return [
            (str(part.get_filename()), part.get_content_type(), part.get_payload(decode=True))
            for part in self.message.iter_attachments()
        ]


DROP = "drop"  # the server takes the message, then the connection ends before its answer


class Handler:
    """What the server does with a message: keeps it and answers ``answer`` (``DROP``: keeps
    it and hangs up)."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answer = "250 OK: queued"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.answer.startswith("250") or self.answer == DROP:
            message = email.message_from_bytes(envelope.content, policy=default)
            assert isinstance(message, EmailMessage)
            self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
        if self.answer == DROP:
            server.transport.close()
            return "250 OK: never heard"
        return self.answer


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Certificate:
    """A self-signed certificate for 127.0.0.1: the server's, and the one a client trusts."""

    def __init__(self, directory: Path) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.now(UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        self.pem = certificate.public_bytes(serialization.Encoding.PEM).decode()
        self.cert_file = directory / "smtp.pem"
        self.key_file = directory / "smtp.key"
        self.cert_file.write_text(self.pem)
        self.key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def client_context(self) -> ssl.SSLContext:
        """What a client that trusts this certificate checks with (the host name too)."""
        return ssl.create_default_context(cadata=self.pem)


class MailServer:
    """The SMTP server: ``stop`` takes it down (connections refused) and ``start`` brings it
    back on the same port. ``logins`` offers AUTH and takes ``SMTP_USER`` with
    ``SMTP_PASSWORD`` only: over plain SMTP (on loopback), or, with ``tls`` (a
    ``Certificate``), only after STARTTLS (``security="starttls"``) or over TLS from the start
    (``"tls"``)."""

    def __init__(
        self,
        *,
        logins: bool = False,
        security: str = "none",
        certificate: "Certificate | None" = None,
    ) -> None:
        self.handler = Handler()
        self.port = _free_port()
        self.logins = logins
        self.security = security
        self.certificate = certificate
        self.attempted: list[str] = []  # the passwords tried
        self._controller: Controller | None = None
        self.start()

    @property
    def received(self) -> list[Received]:
        return self.handler.received

    def url(self, credentials: str = "") -> str:
        scheme = {"none": "smtp", "starttls": "smtp+starttls", "tls": "smtps"}[self.security]
        return f"{scheme}://{credentials}127.0.0.1:{self.port}"

    def _authenticate(
        self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
    ) -> AuthResult:
        assert isinstance(auth_data, LoginPassword)
        self.attempted.append(auth_data.password.decode())
        ok = auth_data.login.decode() == SMTP_USER and auth_data.password.decode() == SMTP_PASSWORD
        return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535

    def start(self) -> None:
        options: dict[str, Any] = {}
        if self.logins:
            options = {
                "authenticator": self._authenticate,
                "auth_require_tls": self.security == "starttls",
            }
        if self.security == "starttls":
            assert self.certificate is not None
            options |= {
                "tls_context": self.certificate.server_context(),
                "require_starttls": True,
            }
        elif self.security == "tls":
            assert self.certificate is not None
            options["ssl_context"] = self.certificate.server_context()
        self._controller = Controller(
            self.handler,
            hostname="127.0.0.1",
            port=self.port,
            server_hostname="smtp.tessera.test",
            **options,
        )
        self._controller.start()

    def stop(self) -> None:
        assert self._controller is not None
        self._controller.stop()
        self._controller = None

    def close(self) -> None:
        """Down for good, whether it is up or not (a fixture's end)."""
        if self._controller is not None:
            self.stop()

    def reset(self) -> None:
        self.received.clear()
        self.attempted.clear()
        self.handler.answer = "250 OK: queued"
        if self._controller is None:
            self.start()


@pytest.fixture(scope="session")
def smtp_server() -> Iterator[MailServer]:
    server = MailServer()
    yield server
    server.close()


@pytest.fixture
def smtp(smtp_server: MailServer) -> MailServer:
    smtp_server.reset()
    return smtp_server


@pytest.fixture(scope="session")
def login_server() -> Iterator[MailServer]:
    server = MailServer(logins=True)
    yield server
    server.close()


@pytest.fixture
def smtp_with_login(login_server: MailServer) -> MailServer:
    login_server.reset()
    return login_server


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    return Certificate(tmp_path_factory.mktemp("smtp-tls"))


@pytest.fixture(scope="session", params=["starttls", "tls"])
def tls_server(request: pytest.FixtureRequest, certificate: Certificate) -> Iterator[MailServer]:
    """A server that takes logins over TLS only: upgraded by STARTTLS, or TLS from the start."""
    server = MailServer(logins=True, security=request.param, certificate=certificate)
    yield server
    server.close()


@pytest.fixture(scope="session")
def mail_settings(settings: Settings, smtp_server: MailServer) -> Settings:
    return Settings(
        **(
            settings.model_dump()
            | {"smtp_url": SecretStr(smtp_server.url()), "mail_from": MAIL_FROM}
        )
    )


@pytest.fixture(scope="session")
async def mail_app(mail_settings: Settings, database: Database) -> AsyncIterator[FastAPI]:
    # `database` first: the schema is migrated, and every test gets the clean slate.
    application = create_app(mail_settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(mail_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=mail_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


@pytest.fixture
async def plain(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app as the tests run it elsewhere: no TESSERA_SMTP_URL."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


def make_postman(database: Database, server: MailServer, **overrides: Any) -> Postman:
    """A sender to ``server``, with tiny retry delays unless overridden."""
    options: dict[str, Any] = {
        "first_retry": 0.05,
        "longest_retry": 0.2,
        "timeout": 5.0,
        "poll_seconds": 0.05,
    } | overrides
    smtp_url = options.pop("smtp_url", server.url())
    return Postman(database, parse_smtp_url(smtp_url), MAIL_FROM, **options)


@pytest.fixture
def postman(mail_app: FastAPI, smtp: MailServer) -> Postman:
    """The sender as the worker makes it: it attaches the tickets' PDFs a mail names."""
    database = database_of(mail_app)
    return make_postman(database, smtp, ticket_pdfs=pdfs_of(database, mail_app.state.signers))


async def send_until(
    postman: Postman, done: Callable[[], bool | Awaitable[bool]], *, within: float = 10.0
) -> None:
    """Sending rounds until ``done()`` (a mail waiting for its retry is sent when it is due)."""
    deadline = time.monotonic() + within
    while True:
        await postman.send_due()
        result = done()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"not done after {within} s of sending rounds")
        await asyncio.sleep(0.02)


async def emails_on(app: FastAPI, tenant: Tenant, on: bool = True) -> None:
    """The project's ticket email switched (as `tessera project set --ticket-emails` does),
    and seen at once (the credential cache would see it within 2 s)."""
    await set_project_rules(database_of(app), project_id=tenant.project_id, ticket_emails=on)
    app.state.authenticator.cache.clear()


@pytest.fixture
async def tenant(mail_app: FastAPI) -> Tenant:
    """A project of ``mail_app`` that emails its tickets."""
    from tests.factories import make_tenant

    made = await make_tenant(mail_app)
    await emails_on(mail_app, made)
    return made


async def mails(database: Database) -> list[Mail]:
    """Every mail in the outbox, oldest first."""
    async with orm.session(database, write=False) as session:
        found = await session.scalars(select(Mail).order_by(Mail.created_at, Mail.id))
        return list(found)
