"""A product's waiting list: the use-cases (docs/api.md, "Waiting list"). The line's rules are
in ``waiting.rules``."""

import uuid

from sqlalchemy.exc import IntegrityError

from tessera.auth.principal import Principal
from tessera.db import Database, rerun_on_conflict
from tessera.errors import MailNotConfigured, ProductNotFound
from tessera.models import EntryStatus
from tessera.models.base import utcnow
from tessera.schemas import Pagination
from tessera.waiting import repository, rules
from tessera.waiting.repository import PlacedEntry
from tessera.waiting.rules import AlreadyWaiting, EntryNotFound, NotSoldOut
from tessera.waiting.schemas import EntryCreate, EntryFilter, EntryList, EntryRead


@rerun_on_conflict
async def join(
    database: Database,
    principal: Principal,
    *,
    product_id: uuid.UUID,
    body: EntryCreate,
    hash_key: bytes,
    base_url: str,
    sends_mail: bool,
) -> EntryRead:
    """Put ``email`` at the end of the product's line for ``quantity`` tickets (404 without
    the product). Offers are emailed: a server that sends none refuses (409). An email waits
    once per product at a time (409), and only for what is not free for sale now (409: the
    product is not sold out). The line moves first, so that stock that came back (an expired
    offer, seats freed) goes to the people already in it."""
    if not sends_mail:
        raise MailNotConfigured("a waiting list's offers are emailed: this server sends none")
    async with database.transaction() as tx:
        now = utcnow()
        product, free = await rules.move_line(
            tx, principal.project_id, product_id, hash_key=hash_key, now=now
        )
        if product is None:
            raise ProductNotFound
        if free >= body.quantity:
            shown = "unlimited" if product.stock is None else f"{free} left"
            raise NotSoldOut(f"the product is not sold out ({shown}): buy it instead")
        try:
            entry = await repository.add_entry(
                tx,
                {
                    "project_id": principal.project_id,
                    "product_id": product_id,
                    "email": body.email,
                    "first_name": body.first_name,
                    "quantity": body.quantity,
                    "status": EntryStatus.WAITING,
                    "base_url": base_url,
                    "created_at": now,
                    "updated_at": now,
                },
            )
        except IntegrityError as exc:
            raise AlreadyWaiting(f"{body.email} is already on this product's waiting list") from exc
        placed = await repository.placed(tx, principal.project_id, product_id, entry.id)
        await tx.commit()
    assert placed is not None
    return _read(placed)


async def list_entries(
    database: Database, principal: Principal, *, product_id: uuid.UUID, query: EntryFilter
) -> EntryList:
    """The product's entries in line order (the first to join first), each with its place
    while in line; ``status`` keeps the entries in it."""
    project_id = principal.project_id
    if await database.read(repository.product, project_id, product_id) is None:
        raise ProductNotFound
    entries, total = await database.read(
        repository.page, project_id, product_id, query, query.status
    )
    return EntryList(
        entries=[_read(entry) for entry in entries],
        pagination=Pagination(page=query.page, limit=query.limit, total=total),
    )


async def counts(
    database: Database, principal: Principal, *, product_id: uuid.UUID
) -> dict[EntryStatus, int]:
    """How many of the product's entries are in each status (absent: none)."""
    return await database.read(repository.counts, principal.project_id, product_id)


@rerun_on_conflict
async def remove(
    database: Database,
    principal: Principal,
    *,
    product_id: uuid.UUID,
    entry_id: uuid.UUID,
    hash_key: bytes,
) -> EntryRead:
    """Take an entry off the list (``rules.remove``); an open offer it had goes to the next
    in line at once."""
    async with database.transaction() as tx:
        now = utcnow()
        project_id = principal.project_id
        # Locks in a claim's order: the offer's link, the product, then the entry.
        entry = await repository.entry(tx, project_id, product_id, entry_id)
        if entry is None:
            raise EntryNotFound
        if entry.link_id is not None:
            await repository.lock_link(tx, entry.link_id)
        await repository.product(tx, project_id, product_id, lock=True)
        entry = await repository.entry(tx, project_id, product_id, entry_id, lock=True)
        assert entry is not None  # entries are never deleted
        if entry.status != EntryStatus.REMOVED:
            await rules.remove(tx, entry, now)
            await rules.move_line(tx, project_id, product_id, hash_key=hash_key, now=now)
        placed = await repository.placed(tx, project_id, product_id, entry_id)
        await tx.commit()
    assert placed is not None
    return _read(placed)


def _read(placed: PlacedEntry) -> EntryRead:
    row = placed.row
    return EntryRead(
        id=row.id,
        product_id=row.product_id,
        email=row.email,
        first_name=row.first_name,
        quantity=row.quantity,
        position=placed.place.position,
        status=row.status,
        offered_at=row.offered_at,
        offer_expires_at=row.offer_expires_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
