"""Tickets as the API gives them: an item's secret and page, reissued on demand; a scanned
text read back as the project's ticket or why it is none."""

import asyncio
import uuid
from collections.abc import Sequence
from typing import Literal, NamedTuple

from tessera.auth.principal import Principal
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Database, Rows, Transaction, rerun_on_conflict
from tessera.mail import service as outbox
from tessera.mail.letters import Kind
from tessera.mail.service import HeldTicket, TicketMail
from tessera.models.base import utcnow
from tessera.products.repository import get_product_row
from tessera.seats.rules import seat_label
from tessera.ticket_keys import codes as codes
from tessera.ticket_keys.service import ProjectKeys, Signer, Signers
from tessera.tickets import repository
from tessera.tickets.pdf import PrintedTicket, ticket_pdf
from tessera.tickets.repository import TicketItem, TicketPageRow
from tessera.tickets.schemas import TicketRead, TicketReissued
from tessera.users.repository import get_user_row
from tessera.users.schemas import UserRef


def ticket_url(base_url: str, hash_key: bytes, item: TicketItem) -> str:
    """The item's ticket page: ``{base_url}/tickets/{token}``."""
    return codes.page_url(base_url, hash_key, item.id, item.ticket_version)


async def mail_ticket(tx: Transaction, mail: TicketMail, item: TicketItem, *, kind: Kind) -> None:
    """Email the item's holder the link to its ticket as it is now (``kind``: why), once per
    version of the ticket."""
    holder = await get_user_row(tx, item.project_id, UserRef("id", item.owner_id))
    product = await get_product_row(tx, item.project_id, item.product_id)
    signer = await mail.signers.within(tx, item.project_id)
    ticket = mail.ticket(
        product=product.name,
        number=item.item_id,
        event_id=product.event_id,
        item_id=item.id,
        version=item.ticket_version,
        secret=signer.secret(item.id, item.ticket_version),
        seat=seat_label(item),
    )
    await outbox.queue_tickets(
        tx,
        item.project_id,
        [HeldTicket(holder, ticket, item.id, item.ticket_version)],
        kind=kind,
        cause=f"{kind.value}:{item.id}:{item.ticket_version}",
    )


def shown(item: TicketItem, signer: Signer, *, hash_key: bytes, base_url: str) -> TicketRead:
    return TicketRead(
        item_id=item.item_id,
        secret=signer.secret(item.id, item.ticket_version),
        url=ticket_url(base_url, hash_key, item),
    )


async def get_ticket(
    database: Database,
    principal: Principal,
    *,
    signers: Signers,
    hash_key: bytes,
    base_url: str,
    product_id: uuid.UUID,
    item: int | uuid.UUID,
) -> TicketRead:
    """The ticket of the project's product's item (by number or id; 404 otherwise)."""
    found = await database.read(
        repository.ticket_item_of_product, principal.project_id, product_id, item
    )
    signer = await signers.of(database, principal.project_id)
    return shown(found, signer, hash_key=hash_key, base_url=base_url)


@rerun_on_conflict
async def reissue_ticket(
    database: Database,
    principal: Principal,
    *,
    signers: Signers,
    hash_key: bytes,
    base_url: str,
    product_id: uuid.UUID,
    item: int | uuid.UUID,
    mail: TicketMail | None = None,
) -> TicketRead:
    """A new secret and page for the item: the old ones stop working at once (a lost phone,
    a resold ticket). A ``ticket.reissued`` change says so; with ``mail``, its holder is
    emailed the new page (``outbox``)."""
    async with database.transaction() as tx:
        found = await repository.ticket_item_of_product(tx, principal.project_id, product_id, item)
        await repository.next_version(tx, found.id, utcnow())
        found = found._replace(ticket_version=found.ticket_version + 1)
        reissued = TicketReissued(
            id=found.id, item_id=found.item_id, product_id=found.product_id, user_id=found.owner_id
        )
        await record(tx, principal.project_id, EventType.TICKET_REISSUED, [reissued])
        if mail is not None:
            await mail_ticket(tx, mail, found, kind=Kind.REISSUED)
        await tx.commit()
    signer = await signers.of(database, principal.project_id)
    return shown(found, signer, hash_key=hash_key, base_url=base_url)


async def ticket_pdfs(
    database: Database,
    signers: Signers,
    *,
    project_id: uuid.UUID,
    wanted: Sequence[tuple[uuid.UUID, int]],
) -> list[tuple[int, bytes]]:
    """Each of the project's tickets ``wanted`` (item id, ticket version) as a PDF of its own,
    with its item's number, on the project's paper: what the mail sender attaches. A ticket
    whose version has moved on (reissued, transferred) is left out: that ticket is no longer
    valid, and its holder was sent the new one."""
    found = await database.read(_printable, project_id, wanted)
    if not found:
        return []
    signer = await signers.of(database, project_id)
    paper, shown = found
    rendered = []
    for item, page in shown:
        printed = PrintedTicket(page, signer.secret(item.id, item.ticket_version))
        rendered.append((item.item_id, await asyncio.to_thread(ticket_pdf, [printed], paper)))
    return rendered


async def _printable(
    rows: Rows, project_id: uuid.UUID, wanted: Sequence[tuple[uuid.UUID, int]]
) -> tuple[str, list[tuple[TicketItem, TicketPageRow]]] | None:
    items = await repository.ticket_items(rows, [item_id for item_id, _ in wanted])
    shown = []
    for item_id, version in wanted:
        item = items.get(item_id)
        if item is None or item.project_id != project_id or item.ticket_version != version:
            continue
        page = await repository.ticket_page(rows, item)
        if page is not None:
            shown.append((item, page))
    return (await repository.paper_of(rows, project_id), shown) if shown else None


async def item_of_code(
    rows: Rows, use: codes.Use, text: str, *, hash_key: bytes
) -> TicketItem | None:
    """The item whose current secret or page token ``text`` is (any project's), or None."""
    item_id = codes.item_of(use, text)
    if item_id is None:
        return None
    item = await repository.ticket_item(rows, item_id)
    if item is None or not codes.is_current(hash_key, use, text, item.ticket_version):
        return None
    return item


# Why a scanned text is not a ticket the door can admit: not one of this project's tickets (any
# text, another project's secret), a forged one (a signature, or a legacy MAC, that does not
# hold), or one superseded (an older ``ticket_version``, or signed by a retired key).
Unreadable = Literal["unknown", "invalid", "revoked"]


async def ticket_of_secret(
    rows: Rows, project_id: uuid.UUID, text: str, *, keys: ProjectKeys, hash_key: bytes
) -> TicketItem | Unreadable:
    """The project's item whose current secret ``text`` is, or why it is none. A signed secret
    is checked with the project's ``keys``; a legacy one (handed out before secrets were
    signed) with the MAC, as before."""
    [found] = await tickets_of_secrets(rows, project_id, [text], keys=keys, hash_key=hash_key)
    return found


async def tickets_of_secrets(
    rows: Rows, project_id: uuid.UUID, texts: Sequence[str], *, keys: ProjectKeys, hash_key: bytes
) -> list[TicketItem | Unreadable]:
    """``ticket_of_secret`` of each text, their items read in one statement."""
    named = named_items(texts, keys)
    return await tickets_of_named(rows, project_id, texts, named, keys=keys, hash_key=hash_key)


class Named(NamedTuple):
    """The item a scanned text names, its signature checked, before the item is read: the
    signed secret's parts (None for a legacy secret, whose MAC is checked with the item)."""

    item_id: uuid.UUID
    signed: codes.SignedSecret | None


def named_items(texts: Sequence[str], keys: ProjectKeys) -> list[Named | Unreadable]:
    """The item each text names once its signature holds with one of ``keys``, or why it names
    none: CPU alone (an Ed25519 signature checked per secret, which releases the GIL), for a
    thread when the texts are many."""
    return [_named(text, keys) for text in texts]


async def tickets_of_named(
    rows: Rows,
    project_id: uuid.UUID,
    texts: Sequence[str],
    named: Sequence[Named | Unreadable],
    *,
    keys: ProjectKeys,
    hash_key: bytes,
) -> list[TicketItem | Unreadable]:
    """The project's items that ``texts`` (as ``named_items`` read them) are the current
    secrets of, or why each is none; the items read in one statement."""
    ids = [one.item_id for one in named if not isinstance(one, str)]
    items = await repository.ticket_items(rows, ids) if ids else {}
    return [
        one
        if isinstance(one, str)
        else _judged(text, one, items.get(one.item_id), project_id, keys, hash_key)
        for text, one in zip(texts, named, strict=True)
    ]


def _named(text: str, keys: ProjectKeys) -> Named | Unreadable:
    """The item a secret names once its signature holds (a legacy one's: its MAC is checked
    with the item), or why it names none."""
    signed = codes.read_signed(text)
    if signed is None:
        item_id = codes.item_of(codes.Use.SECRET, text)
        return "unknown" if item_id is None else Named(item_id, None)
    public_key = keys.live.get(signed.kid) or keys.retired.get(signed.kid)
    if public_key is None:
        return "unknown"
    if not codes.signature_holds(public_key, signed):
        return "invalid"
    return Named(signed.item_id, signed)


def _judged(
    text: str,
    named: Named,
    item: TicketItem | None,
    project_id: uuid.UUID,
    keys: ProjectKeys,
    hash_key: bytes,
) -> TicketItem | Unreadable:
    if item is None or item.project_id != project_id:
        return "unknown"  # no such item, or the project's own signature on one it has no more
    signed = named.signed
    if signed is None:  # legacy: the MAC of which version
        version = codes.legacy_version(hash_key, text.upper(), item.ticket_version)
        if version is None:
            return "invalid"
        return item if version == item.ticket_version else "revoked"
    if signed.kid not in keys.live or signed.version < item.ticket_version:
        return "revoked"
    if signed.version > item.ticket_version:
        return "invalid"  # a version never handed out
    return item
