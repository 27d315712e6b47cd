"""Claim link and claim queries (statements built once, see users.repository)."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, select, update

from tessera.db import Joined, Rows, Transaction, lock_for_update, table_of
from tessera.models import Claim, ClaimLink, Event, Product, ProductItem, Project
from tessera.products.rows import ItemRow
from tessera.schemas import PageParams


class LinkRow(NamedTuple):
    """A claim link's row (``claim_links``)."""

    project_id: uuid.UUID
    product_id: uuid.UUID
    token_hash: str
    token_hint: str
    max_claims: int
    claims: int
    expires_at: int | None
    email: str | None
    reference_id: str | None
    revoked_at: datetime | None
    quantity: int
    hold_id: uuid.UUID | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class LinkKey(NamedTuple):
    """Whose a link is."""

    id: uuid.UUID
    project_id: uuid.UUID


class OfferRow(NamedTuple):
    """A link with its product and the product's event (None without one): ``_OFFER``'s
    rows."""

    project_id: uuid.UUID
    product_id: uuid.UUID
    token_hash: str
    token_hint: str
    max_claims: int
    claims: int
    expires_at: int | None
    email: str | None
    reference_id: str | None
    revoked_at: datetime | None
    quantity: int
    hold_id: uuid.UUID | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    product_name: str
    product_description: str | None
    product_type: str
    event_name: str | None
    event_description: str | None
    event_location: str | None
    event_address: str | None
    event_start_date: int | None
    event_end_date: int | None


class ClaimedProduct(NamedTuple):
    """What ``TransferItem`` shows of an item's product."""

    id: uuid.UUID
    name: str
    type: str
    redemption_quantity: int


class ClaimedItem(NamedTuple):
    """A join: an item claimed before, with what ``TransferItem`` shows of its product
    (``_CLAIMED_ITEM``'s rows, read by ``CLAIMED_ITEM``)."""

    row: ItemRow
    product: ClaimedProduct


CLAIMED_ITEM = Joined(ClaimedItem)


_LINKS, _CLAIMS = table_of(ClaimLink), table_of(Claim)
_PRODUCTS, _EVENTS, _ITEMS = table_of(Product), table_of(Event), table_of(ProductItem)

_OF_PRODUCT = (
    _LINKS.c.project_id == bindparam("project_id"),
    _LINKS.c.product_id == bindparam("product_id"),
)
_LINK = select(_LINKS).where(*_OF_PRODUCT, _LINKS.c.id == bindparam("id"))
_LINK_PAGE = (
    select(_LINKS)
    .where(*_OF_PRODUCT)
    .order_by(_LINKS.c.created_at, _LINKS.c.id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
_LINK_TOTAL = select(func.count()).where(*_OF_PRODUCT)
_PRODUCT_EXISTS = select(_PRODUCTS.c.id).where(
    _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("product_id")
)
# Claims of one link queue on its row: the count is read and bumped under the lock.
_LOCK_BY_TOKEN = lock_for_update(select(_LINKS).where(_LINKS.c.token_hash == bindparam("digest")))
_LINK_BY_TOKEN = select(_LINKS.c.id, _LINKS.c.project_id).where(
    _LINKS.c.token_hash == bindparam("digest")
)
# The public view: the link, its product and the product's event, in one statement.
_OFFER = (
    select(
        _LINKS,
        _PRODUCTS.c.name.label("product_name"),
        _PRODUCTS.c.description.label("product_description"),
        _PRODUCTS.c.type.label("product_type"),
        _EVENTS.c.name.label("event_name"),
        _EVENTS.c.description.label("event_description"),
        _EVENTS.c.location.label("event_location"),
        _EVENTS.c.address.label("event_address"),
        _EVENTS.c.start_date.label("event_start_date"),
        _EVENTS.c.end_date.label("event_end_date"),
    )
    .join(_PRODUCTS, _PRODUCTS.c.id == _LINKS.c.product_id)
    .outerjoin(_EVENTS, _EVENTS.c.id == _PRODUCTS.c.event_id)
    .where(_LINKS.c.token_hash == bindparam("digest"))
)
# The items an email claimed through a link, with their product.
_CLAIMED_ITEM = (
    select(
        _ITEMS,
        *(_PRODUCTS.c[key].label(f"product__{key}") for key in ClaimedProduct._fields),
    )
    .join(_CLAIMS, _CLAIMS.c.item_id == _ITEMS.c.id)
    .join(_PRODUCTS, _PRODUCTS.c.id == _ITEMS.c.product_id)
    .where(_CLAIMS.c.link_id == bindparam("link_id"), _CLAIMS.c.email == bindparam("email"))
    .order_by(_ITEMS.c.item_id)
)
_COUNT_CLAIM = (
    update(_LINKS)
    .where(_LINKS.c.id == bindparam("id"))
    .values(claims=_LINKS.c.claims + 1, updated_at=bindparam("now"))
)
_REVOKE = (
    update(_LINKS)
    .where(_LINKS.c.id == bindparam("id"), _LINKS.c.revoked_at.is_(None))
    .values(revoked_at=bindparam("now"), updated_at=bindparam("now"))
)
_REQUIRES_ACTIVATION = select(table_of(Project).c.require_activation).where(
    table_of(Project).c.id == bindparam("id")
)


async def add_link(tx: Transaction, link: dict[str, Any]) -> LinkRow:
    """Write the link; the link as written. A reference id the project's links have already
    raises IntegrityError."""
    [written] = await tx.insert(ClaimLink, [link], LinkRow)
    return written


async def add_claims(tx: Transaction, claims: list[dict[str, Any]]) -> None:
    """A claim's rows: one per item it issued."""
    await tx.insert(Claim, claims)


async def read_link(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, link_id: uuid.UUID
) -> LinkRow | None:
    return await rows.first(
        _LINK, LinkRow, project_id=project_id, product_id=product_id, id=link_id
    )


async def read_links(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, paging: PageParams
) -> tuple[list[LinkRow], int] | None:
    """A page of the product's links (oldest first) and their total; None without the product."""
    keys = {"project_id": project_id, "product_id": product_id}
    if await rows.scalar(_PRODUCT_EXISTS, **keys) is None:
        return None
    total: int = await rows.scalar(_LINK_TOTAL, **keys)
    page = await rows.all(_LINK_PAGE, LinkRow, **keys, limit=paging.limit, offset=paging.offset)
    return page, total


async def read_offer(rows: Rows, digest: str) -> OfferRow | None:
    return await rows.first(_OFFER, OfferRow, digest=digest)


async def read_link_by_token(rows: Rows, digest: str) -> LinkKey | None:
    """The ``id`` and ``project_id`` of the link whose token has ``digest``."""
    return await rows.first(_LINK_BY_TOKEN, LinkKey, digest=digest)


async def lock_link_by_token(tx: Transaction, digest: str) -> LinkRow | None:
    """The link whose token has ``digest``, locked until the transaction ends, or None."""
    return await tx.first(_LOCK_BY_TOKEN, LinkRow, digest=digest)


async def claimed_items(rows: Rows, link_id: uuid.UUID, email: str) -> list[ClaimedItem]:
    """The items ``email`` claimed through the link before (none: not claimed), in their
    order, with their product."""
    return await rows.all(_CLAIMED_ITEM, CLAIMED_ITEM, link_id=link_id, email=email)


async def count_claim(tx: Transaction, link_id: uuid.UUID, now: datetime) -> None:
    await tx.execute(_COUNT_CLAIM, id=link_id, now=now)


async def revoke(tx: Transaction, link_id: uuid.UUID, now: datetime) -> None:
    """Revoke the link (of any project: the caller reads it back in its project), unless it
    is revoked already."""
    await tx.execute(_REVOKE, id=link_id, now=now)


async def requires_activation(rows: Rows, project_id: uuid.UUID) -> bool:
    """Whether the project requires activation (``Principal.require_activation``)."""
    required: bool = await rows.scalar(_REQUIRES_ACTIVATION, id=project_id)
    return required
