"""A local SMTP sink for the event day (aiosmtpd on 127.0.0.1, in a thread of its own), and the
ticket emails it took, read as a holder reads them: for each ticket, its page, its PDF and its
secret."""

import base64
import email
import re
import socket
import threading
import uuid
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import default
from typing import Any

from aiosmtpd.controller import Controller

# A ticket of an email's plain text: its product and number, its page, the PDF, the secret.
TICKET = re.compile(
    r"^(?P<product>.+), item #(?P<number>\d+)\n(?:.*\n)*?"
    r"(?P<page>https?://\S+/tickets/[A-Za-z0-9_-]{43})\n"
    r"To print: (?P<pdf>\S+)\n(?:.*\n)*?"
    r"Ticket secret, if the code cannot be scanned: (?P<secret>[A-Z2-7]{143})$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Ticket:
    """A ticket as an email gives it: the item its secret names, at which version."""

    number: int
    page: str
    pdf: str
    secret: str

    @property
    def item_id(self) -> uuid.UUID:
        return uuid.UUID(bytes=_raw(self.secret)[5:21])

    @property
    def version(self) -> int:
        return int.from_bytes(_raw(self.secret)[21:25], "big")


def _raw(secret: str) -> bytes:
    return base64.b32decode(secret + "=" * (-len(secret) % 8))


@dataclass(frozen=True)
class Letter:
    to: str
    subject: str
    tickets: list[Ticket]


class _Handler:
    def __init__(self) -> None:
        self.raw: list[tuple[list[str], bytes]] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.lock:
            self.raw.append((list(envelope.rcpt_tos), bytes(envelope.content)))
        return "250 OK: queued"


class Mailbox:
    """The SMTP server: ``url`` for ``TESSERA_SMTP_URL``; ``count`` the messages taken so far;
    ``letters`` them read."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self._handler = _Handler()
        self._controller = Controller(self._handler, hostname="127.0.0.1", port=self.port)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def __enter__(self) -> "Mailbox":
        self._controller.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._controller.stop()

    @property
    def count(self) -> int:
        with self._handler.lock:
            return len(self._handler.raw)

    def letters(self) -> list[Letter]:
        with self._handler.lock:
            taken = list(self._handler.raw)
        return [_read(rcpt_tos, content) for rcpt_tos, content in taken]


def _read(rcpt_tos: list[str], content: bytes) -> Letter:
    message = email.message_from_bytes(content, policy=default)
    assert isinstance(message, EmailMessage)
    part = message.get_body(preferencelist=("plain",))
    assert part is not None, "a ticket email without a text part"
    text = str(part.get_content()).replace("\r\n", "\n")
    tickets = [
        Ticket(int(found["number"]), found["page"], found["pdf"], found["secret"])
        for found in TICKET.finditer(text)
    ]
    [to] = rcpt_tos
    return Letter(to=to.lower(), subject=str(message["subject"]), tickets=tickets)
