"""What the use-cases call to email people: the mail is written in the caller's transaction, so
that it exists exactly when the change that causes it was committed; the job worker sends it
(``tessera.mail.sender``).

A use-case that may send ticket email takes a ``TicketMail`` or None. The routes give one only
when the server sends email (``TESSERA_SMTP_URL``) and the project asks for ticket email
(``ticket_emails``, which the credential carries: no query); with None the use-case does
nothing more. The links lead to ``TESSERA_PUBLIC_URL``, else to the base URL of the request
that made the change; outside a request (the CLI, the worker) without ``TESSERA_PUBLIC_URL``
no ticket email is written, for want of a URL to give.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from tessera.config import Settings
from tessera.db import Rows, Transaction
from tessera.mail import letters, repository
from tessera.mail.letters import EventFacts, Kind, Letter, Ticket
from tessera.models import MailStatus
from tessera.models.base import new_id, utcnow
from tessera.seats.rules import OnTicket, seat_label
from tessera.ticket_keys import codes as ticket_codes
from tessera.ticket_keys.service import Signers


@dataclass(frozen=True, slots=True)
class TicketMail:
    """What writing a ticket email needs: the key that the ticket links are made with, the
    signers of the secrets it carries, and where people reach this server."""

    hash_key: bytes
    base_url: str
    signers: Signers
    apple_wallet: bool = False  # the server signs Apple Wallet passes: the mail links them
    google_wallet: bool = False  # and Google Wallet links

    def ticket(
        self,
        *,
        product: str,
        number: int,
        event_id: uuid.UUID | None,
        item_id: uuid.UUID,
        version: int,
        secret: str,
        seat: str | None = None,
    ) -> Ticket:
        """The item's ticket as an email links it: its page, and the wallets' where the
        server has them."""
        url = ticket_codes.page_url(self.base_url, self.hash_key, item_id, version)
        return Ticket(
            product=product,
            number=number,
            event_id=event_id,
            url=url,
            secret=secret,
            seat=seat,
            apple_pass=f"{url}/pass.pkpass" if self.apple_wallet else None,
            google_wallet=f"{url}/google-wallet" if self.google_wallet else None,
        )


def ticket_mail(
    settings: Settings, signers: Signers, base_url: str | None = None
) -> TicketMail | None:
    """Ticket mail, when the server sends email and knows its public URL
    (``TESSERA_PUBLIC_URL``, else ``base_url``: the request's); None otherwise."""
    base = settings.public_url or base_url
    if settings.smtp_url is None or base is None:
        return None
    return TicketMail(
        settings.hash_key_bytes,
        base.rstrip("/"),
        signers,
        apple_wallet=settings.apple_wallet,
        google_wallet=settings.google_wallet,
    )


class Holder(Protocol):
    """Whom a ticket email goes to: a user's row, or an item's owner."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def email(self) -> str: ...
    @property
    def first_name(self) -> str | None: ...


class HeldTicket(NamedTuple):
    """A ticket an email links to, its holder, and which item at which version it is (what
    the sender renders the PDF of, when the project attaches them)."""

    holder: Holder
    ticket: Ticket
    item_id: uuid.UUID
    version: int


class TicketProduct(Protocol):
    """What a ticket email says of the item's product."""

    @property
    def name(self) -> str: ...
    @property
    def event_id(self) -> uuid.UUID | None: ...


class TicketRow(OnTicket, Protocol):
    """What a ticket's link is made of: its item's id, number and ticket version (and the
    seat the email names)."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def item_id(self) -> int: ...
    @property
    def ticket_version(self) -> int: ...


class Ticketed(Protocol):
    """An item whose ticket an email links to: an item's row with its product and owner."""

    @property
    def row(self) -> TicketRow: ...
    @property
    def owner(self) -> Holder: ...
    @property
    def product(self) -> TicketProduct: ...


async def tickets_of(
    tx: Transaction, mail: TicketMail, project_id: uuid.UUID, items: Sequence[Ticketed]
) -> list[HeldTicket]:
    """The project's items' tickets as an email shows them (the page's link, the secret),
    each with its holder."""
    signer = await mail.signers.within(tx, project_id)
    return [
        HeldTicket(
            item.owner,
            mail.ticket(
                product=item.product.name,
                number=item.row.item_id,
                event_id=item.product.event_id,
                item_id=item.row.id,
                version=item.row.ticket_version,
                secret=signer.secret(item.row.id, item.row.ticket_version),
                seat=seat_label(item.row),
            ),
            item.row.id,
            item.row.ticket_version,
        )
        for item in items
    ]


async def queue_tickets(
    tx: Transaction,
    project_id: uuid.UUID,
    held: Sequence[HeldTicket],
    *,
    kind: Kind,
    cause: str,
) -> int:
    """One email to each holder of ``held`` with a link to each of their tickets (the page,
    the PDF), for the change ``cause`` (the mail's cause is ``{cause}:{user id}``); how many
    were written. When the project asks for it (``ticket_pdf_in_emails``), the mail names its
    tickets for the sender to attach their PDFs, rendered as it sends."""
    by_holder: dict[uuid.UUID, list[HeldTicket]] = {}
    for one in held:
        by_holder.setdefault(one.holder.id, []).append(one)
    events = await _events(tx, project_id, {one.ticket.event_id for one in held})
    attach = bool(held) and await repository.pdfs_in_emails(tx, project_id)
    written = 0
    for holder_id, theirs in by_holder.items():
        holder = theirs[0].holder
        if not holder.email:
            continue
        letter = letters.tickets_letter(
            kind,
            first_name=holder.first_name,
            tickets=[one.ticket for one in theirs],
            events=events,
        )
        pdfs: list[list[str | int]] | None = None
        if attach:
            pdfs = [[str(one.item_id), one.version] for one in theirs]
        written += await _add(
            tx, project_id, holder.email, letter, f"{cause}:{holder_id}", ticket_pdfs=pdfs
        )
    return written


async def queue_invitation(
    tx: Transaction,
    project_id: uuid.UUID,
    *,
    link_id: uuid.UUID,
    email: str,
    product: str,
    event_id: uuid.UUID | None,
    claim_url: str,
    expires_at: int | None,
) -> None:
    """A claim link's invitation to ``email``, with the claim page's URL (once per link)."""
    events = await _events(tx, project_id, {event_id})
    letter = letters.invitation_letter(
        product=product,
        event=events.get(event_id) if event_id is not None else None,
        claim_url=claim_url,
        expires_at=expires_at,
    )
    await _add(tx, project_id, email, letter, f"claim-invite:{link_id}")


async def queue_offer(
    tx: Transaction,
    project_id: uuid.UUID,
    *,
    link_id: uuid.UUID,
    email: str,
    first_name: str | None,
    product: str,
    event_id: uuid.UUID | None,
    quantity: int,
    claim_url: str,
    expires_at: int,
) -> None:
    """A waiting list offer to ``email``, with its claim page's URL (once per offer)."""
    events = await _events(tx, project_id, {event_id})
    letter = letters.offer_letter(
        first_name=first_name,
        product=product,
        event=events.get(event_id) if event_id is not None else None,
        quantity=quantity,
        claim_url=claim_url,
        expires_at=expires_at,
    )
    await _add(tx, project_id, email, letter, f"waiting-offer:{link_id}")


async def _events(
    rows: Rows, project_id: uuid.UUID, event_ids: set[uuid.UUID | None]
) -> dict[uuid.UUID, EventFacts]:
    wanted = {event_id for event_id in event_ids if event_id is not None}
    found = await repository.event_facts(rows, project_id, wanted)
    return {
        row.id: EventFacts(row.name, row.location, row.start_date, row.end_date) for row in found
    }


async def _add(
    tx: Transaction,
    project_id: uuid.UUID,
    recipient: str,
    letter: Letter,
    cause: str,
    *,
    ticket_pdfs: list[list[str | int]] | None = None,
) -> int:
    now = utcnow()
    written = await repository.add_mail(
        tx,
        {
            "id": new_id(),
            "project_id": project_id,
            "recipient": recipient,
            "subject": letter.subject,
            "text_body": letter.text,
            "html_body": letter.html,
            "ticket_pdfs": ticket_pdfs,
            "cause": cause,
            "status": MailStatus.QUEUED,
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
        },
    )
    return int(written)
