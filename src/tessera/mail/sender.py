"""Mail delivery: the job worker's companion loop that sends the outbox's due mails over SMTP
(``TESSERA_SMTP_URL``, with aiosmtplib).

Every poll it takes up to ``MAILS_PER_ROUND`` due mails, marking them ``sending`` under a lease
(``LEASE``) in the statement that takes them (on PostgreSQL with ``SKIP LOCKED``: any number of
workers send each mail once), and sends them over one connection:

- the server takes it (250 to the message): ``sent_at`` is written;
- a 4xx answer, or no server to talk to (refused, down, a timeout before the message went,
  a refused login): the mail is queued again, retried after 5 s, then twice as long each time up
  to every 5 minutes; once it is 3 days old it is given up (``failed``);
- a 5xx answer to the mail itself (its sender, its recipient, its message): ``failed`` at once;
- a failed mail fires ``mail.failed``.

A ticket email of a project that attaches its tickets' PDFs names them (``ticket_pdfs``: item
id and ticket version); the sender renders them as it builds the message (``TicketPdfs``, which
the tickets package gives: this package does not know how a ticket is drawn), leaving out a
ticket whose version has moved on since.

At most once. Right before its message goes to the server a mail is marked ``sent`` (only by
the sender whose lease it is), so a worker that dies after that (or a connection that drops
while the server takes the message, when nobody can say whether it took it) leaves it ``sent``
without ``sent_at``, never sent again: resending would mail the same links twice whenever the
server took it but the worker heard nothing. The console shows such a mail as unconfirmed, with
its last error. A worker that dies before that point leaves its mails ``sending``: they are
taken again when the lease ends.
"""

import asyncio
import logging
import ssl
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr
from enum import Enum

from aiosmtplib import SMTP, SMTPException, SMTPNotSupported, SMTPResponseException

from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.config import Settings
from tessera.db import Database
from tessera.jobs.worker import run_rounds
from tessera.mail import repository
from tessera.mail.repository import MailRow
from tessera.mail.schemas import MailFailed
from tessera.models import MailStatus
from tessera.models.base import utcnow
from tessera.toolkit.smtp_url import SmtpServer

log = logging.getLogger("tessera.mail")

FIRST_RETRY_SECONDS = 5.0
LONGEST_RETRY_SECONDS = 300.0
GIVE_UP_AFTER = timedelta(days=3)
# A round's mails are the sender's this long (a round of 10 slow mails fits well within it).
LEASE = timedelta(minutes=10)
TIMEOUT_SECONDS = 30.0
ERROR_KEPT = 500
# Sent and failed mails are forgotten after this long (a chore of the worker).
KEPT_FOR = timedelta(days=30)
PURGE_SECONDS = 3600.0


class Verdict(Enum):
    SENT = "sent"  # the server took it
    RETRY = "retry"  # not taken: again later
    FAILED = "failed"  # refused for good
    UNCONFIRMED = "unconfirmed"  # may or may not have been taken: never again
    LEFT = "left"  # the lease ran out and another sender took it: not this sender's


# The tickets' PDFs of a project, by item id and ticket version: each ticket still at that
# version as (its item's number, the PDF).
TicketPdfs = Callable[
    [uuid.UUID, Sequence[tuple[uuid.UUID, int]]], Awaitable[list[tuple[int, bytes]]]
]


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    error: str | None = None


def retry_delay(attempts: int, *, first: float, longest: float) -> float:
    """Seconds before the next attempt after ``attempts`` attempts: ``first``, then twice as
    long each time, at most ``longest``."""
    return min(first * 2.0 ** max(attempts - 1, 0), longest)


class Postman:
    """Sends the outbox's mails (``send_due``, a round; ``run_forever``, the worker's loop)."""

    def __init__(
        self,
        database: Database,
        server: SmtpServer,
        mail_from: str,
        *,
        poll_seconds: float = 1.0,
        first_retry: float = FIRST_RETRY_SECONDS,
        longest_retry: float = LONGEST_RETRY_SECONDS,
        give_up_after: timedelta = GIVE_UP_AFTER,
        timeout: float = TIMEOUT_SECONDS,
        tls_context: ssl.SSLContext | None = None,
        ticket_pdfs: TicketPdfs | None = None,
    ) -> None:
        self.database = database
        self.server = server
        self.mail_from = mail_from
        self.sender = parseaddr(mail_from)[1]
        self.domain = self.sender.rpartition("@")[2] or "localhost"
        self.poll_seconds = poll_seconds
        self.first_retry = first_retry
        self.longest_retry = longest_retry
        self.give_up_after = give_up_after
        self.timeout = timeout
        # The certificates trusted (None: the system's, with the host name checked).
        self.tls_context = tls_context
        # None: no attachment (the mails still link to the PDFs).
        self.ticket_pdfs = ticket_pdfs

    @classmethod
    def from_settings(
        cls, database: Database, settings: Settings, *, ticket_pdfs: TicketPdfs | None = None
    ) -> "Postman | None":
        """The sender of ``TESSERA_SMTP_URL``; None when it is unset (no email)."""
        server = settings.smtp
        if server is None or settings.mail_from is None:
            return None
        return cls(
            database,
            server,
            settings.mail_from,
            poll_seconds=settings.worker_poll_seconds,
            ticket_pdfs=ticket_pdfs,
        )

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Send until ``stop``; the worker runs this beside its jobs."""
        await run_rounds(stop, self.send_due, poll_seconds=self.poll_seconds, what="mail")

    async def send_due(self) -> int:
        """One round: the due mails taken (marked sent) and handed to the server, each
        outcome written as it comes; how many were taken."""
        now = utcnow()
        if not await self.database.read(repository.any_due, now):
            return 0
        async with self.database.transaction() as tx:
            taken = await repository.take_due(tx, now, now + LEASE)
            await tx.commit()
        client: SMTP | None = None
        unreachable: Outcome | None = None  # the round's server could not be reached
        try:
            for mail in taken:
                if unreachable is None and (client is None or not client.is_connected):
                    client, unreachable = await self._connect()
                if unreachable is not None or client is None:
                    outcome = unreachable or Outcome(Verdict.RETRY, "not connected")
                else:
                    outcome = await self._deliver(client, mail)
                await self._settle(mail, outcome)
        finally:
            if client is not None and client.is_connected:
                await _quit(client)
        return len(taken)

    async def _connect(self) -> tuple[SMTP | None, Outcome | None]:
        server = self.server
        password = server.password.get_secret_value() if server.password else None
        client = SMTP(
            hostname=server.host,
            port=server.port,
            username=server.username,
            password=password,
            use_tls=server.security == "tls",
            start_tls=server.security == "starttls",
            local_hostname=self.domain,
            timeout=self.timeout,
            tls_context=self.tls_context,
        )
        try:
            await client.connect()
        except (SMTPException, OSError) as exc:
            client.close()
            return None, Outcome(Verdict.RETRY, self._error(f"{server}: ", exc))
        return client, None

    async def _deliver(self, client: SMTP, mail: MailRow) -> Outcome:
        """``mail`` over ``client``; which part of the conversation failed says whether the
        server may have taken it."""
        recipient = mail.recipient
        international = not recipient.isascii()
        try:
            attachments = await self._attachments(mail)
        except Exception as exc:  # a read or a render that failed: nothing went, again later
            log.exception("mail %s: its tickets' PDFs were not rendered", mail.id)
            return Outcome(Verdict.RETRY, self._error("the tickets' PDFs: ", exc))
        try:
            message = self._message(mail, attachments, international=international)
            await client.mail(self.sender, options=["SMTPUTF8"] if international else [])
            await client.rcpt(recipient)
        except SMTPResponseException as exc:
            await _reset(client)
            return _answered(exc)
        except SMTPNotSupported as exc:  # an address this server cannot take, ever
            return Outcome(Verdict.FAILED, self._error("", exc))
        except (SMTPException, OSError) as exc:  # before the message: it did not go
            client.close()
            return Outcome(Verdict.RETRY, self._error("", exc))
        async with self.database.transaction() as tx:
            handed_over = await repository.hand_over(tx, mail)
            await tx.commit()
        if not handed_over:
            await _reset(client)
            return Outcome(Verdict.LEFT)
        try:
            await client.data(message)
        except SMTPResponseException as exc:
            await _reset(client)
            return _answered(exc)
        except (SMTPException, OSError) as exc:
            client.close()
            return Outcome(
                Verdict.UNCONFIRMED,
                self._error("the connection ended while the server took the message: ", exc),
            )
        return Outcome(Verdict.SENT)

    async def _attachments(self, mail: MailRow) -> list[tuple[str, bytes]]:
        """The mail's tickets' PDFs as files to attach, ``ticket-<item number>.pdf``."""
        if not mail.ticket_pdfs or self.ticket_pdfs is None:
            return []
        wanted = [(uuid.UUID(str(item)), int(version)) for item, version in mail.ticket_pdfs]
        files: list[tuple[str, bytes]] = []
        names: set[str] = set()
        for number, pdf in await self.ticket_pdfs(mail.project_id, wanted):
            name = f"ticket-{number}.pdf"
            if name in names:  # two products' items of one number
                name = f"ticket-{number}-{len(files) + 1}.pdf"
            names.add(name)
            files.append((name, pdf))
        return files

    def _message(
        self, mail: MailRow, attachments: list[tuple[str, bytes]], *, international: bool
    ) -> bytes:
        message = EmailMessage()
        message["From"] = self.mail_from
        message["To"] = mail.recipient
        message["Subject"] = mail.subject
        message["Date"] = format_datetime(utcnow())
        # One id per mail: a receiver can tell the mail by it.
        message["Message-ID"] = f"<{mail.id}@{self.domain}>"
        message["Auto-Submitted"] = "auto-generated"
        message.set_content(mail.text_body)
        message.add_alternative(mail.html_body, subtype="html")
        for name, pdf in attachments:
            message.add_attachment(pdf, maintype="application", subtype="pdf", filename=name)
        return message.as_bytes(policy=policy.SMTPUTF8 if international else policy.SMTP)

    def _error(self, prefix: str, exc: Exception) -> str:
        """What went wrong, never with the password (a server may repeat what it was sent)."""
        text = f"{prefix}{type(exc).__name__}: {exc}"
        if self.server.password is not None:
            secret = self.server.password.get_secret_value()
            if secret:
                text = text.replace(secret, "**********")
        return text[:ERROR_KEPT]

    async def _settle(self, mail: MailRow, outcome: Outcome) -> None:
        """Write the attempt's outcome (a failed mail with its ``mail.failed`` change)."""
        if outcome.verdict is Verdict.LEFT:
            return
        now = utcnow()
        attempts = mail.attempts + 1
        verdict, error = outcome.verdict, outcome.error
        if verdict is Verdict.RETRY and now - mail.created_at >= self.give_up_after:
            verdict, error = Verdict.FAILED, f"given up after {attempts} attempts: {error}"
        async with self.database.transaction() as tx:
            if verdict is Verdict.RETRY:
                delay = retry_delay(attempts, first=self.first_retry, longest=self.longest_retry)
                kept = await repository.put_back(
                    tx,
                    mail,
                    attempts=attempts,
                    next_attempt_at=now + timedelta(seconds=delay),
                    last_error=error or "not sent",
                )
                log.warning(
                    "mail %s not sent (attempt %d), again in %.0f s: %s",
                    mail.id,
                    attempts,
                    delay,
                    error,
                )
            else:
                kept = await repository.settle(
                    tx,
                    mail,
                    status=MailStatus.FAILED if verdict is Verdict.FAILED else MailStatus.SENT,
                    attempts=attempts,
                    last_error=error if verdict is not Verdict.SENT else mail.last_error,
                    sent_at=now if verdict is Verdict.SENT else None,
                )
                if verdict is Verdict.FAILED and kept:
                    failed = MailFailed(
                        id=mail.id,
                        to=mail.recipient,
                        subject=mail.subject,
                        cause=mail.cause,
                        attempts=attempts,
                        error=error or "refused",
                        created_at=mail.created_at,
                    )
                    await record(tx, mail.project_id, EventType.MAIL_FAILED, [failed])
                    log.warning("mail %s failed: %s", mail.id, error)
                elif verdict is Verdict.UNCONFIRMED:
                    log.warning("mail %s may not have been sent: %s", mail.id, error)
            await tx.commit()


def _answered(exc: SMTPResponseException) -> Outcome:
    """The server's refusal: 5xx for good, anything else for now."""
    error = f"the server answered {exc.code} {exc.message}"[:ERROR_KEPT]
    return Outcome(Verdict.FAILED if 500 <= exc.code < 600 else Verdict.RETRY, error)


async def _reset(client: SMTP) -> None:
    """A refused envelope is dropped, so that the connection takes the next mail."""
    try:
        await client.rset()
    except (SMTPException, OSError):
        client.close()


async def _quit(client: SMTP) -> None:
    try:
        await client.quit()
    except (SMTPException, OSError):
        client.close()


def purge_chore() -> tuple[float, Callable[[Database], Awaitable[int]]]:
    """The job worker's chore that forgets the mails sent or failed ``KEPT_FOR`` ago."""

    async def purge_mails(database: Database) -> int:
        async with database.transaction() as tx:
            purged = await repository.purge(tx, utcnow() - KEPT_FOR)
            await tx.commit()
        return purged

    return PURGE_SECONDS, purge_mails
