"""Tickets as the API gives them: an item's secret and page, reissued on demand."""

import uuid

from tessera.auth.principal import Principal
from tessera.changes.outbox import EventType, record
from tessera.db import Database, Rows
from tessera.models.base import utcnow
from tessera.tickets import codes, repository
from tessera.tickets.repository import TicketItem
from tessera.tickets.schemas import TicketRead, TicketReissued


def ticket_url(base_url: str, hash_key: bytes, item: TicketItem) -> str:
    """The item's ticket page: ``{base_url}/tickets/{token}``."""
    return f"{base_url}/tickets/{codes.page_token(hash_key, item.id, item.ticket_version)}"


def shown(item: TicketItem, *, hash_key: bytes, base_url: str) -> TicketRead:
    return TicketRead(
        item_id=item.item_id,
        secret=codes.secret(hash_key, item.id, item.ticket_version),
        url=ticket_url(base_url, hash_key, item),
    )


async def get_ticket(
    database: Database,
    principal: Principal,
    *,
    hash_key: bytes,
    base_url: str,
    product_id: uuid.UUID,
    item: int | uuid.UUID,
) -> TicketRead:
    """The ticket of the project's product's item (by number or id; 404 otherwise)."""
    found = await database.read(
        repository.ticket_item_of_product, principal.project_id, product_id, item
    )
    return shown(found, hash_key=hash_key, base_url=base_url)


async def reissue_ticket(
    database: Database,
    principal: Principal,
    *,
    hash_key: bytes,
    base_url: str,
    product_id: uuid.UUID,
    item: int | uuid.UUID,
) -> TicketRead:
    """A new secret and page for the item: the old ones stop working at once (a lost phone,
    a resold ticket). A ``ticket.reissued`` change says so."""
    async with database.transaction() as tx:
        found = await repository.ticket_item_of_product(tx, principal.project_id, product_id, item)
        await repository.next_version(tx, found.id, utcnow())
        found = found._replace(ticket_version=found.ticket_version + 1)
        reissued = TicketReissued(
            id=found.id, item_id=found.item_id, product_id=found.product_id, user_id=found.owner_id
        )
        await record(tx, principal.project_id, EventType.TICKET_REISSUED, [reissued])
        await tx.commit()
    return shown(found, hash_key=hash_key, base_url=base_url)


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
