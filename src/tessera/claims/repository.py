"""Claim link and claim queries (statements built once, see users.repository)."""

import uuid
from typing import Any

from sqlalchemy import bindparam, func, select, update

from tessera.db import Rows, lock_for_update, table_of
from tessera.models import Claim, ClaimLink, Event, Product, ProductItem, Project
from tessera.schemas import PageParams

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
LOCK_BY_TOKEN = lock_for_update(select(_LINKS).where(_LINKS.c.token_hash == bindparam("digest")))
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
CLAIMED_ITEM = (
    select(_ITEMS)
    .join(_CLAIMS, _CLAIMS.c.item_id == _ITEMS.c.id)
    .where(_CLAIMS.c.link_id == bindparam("link_id"), _CLAIMS.c.email == bindparam("email"))
)
COUNT_CLAIM = (
    update(_LINKS)
    .where(_LINKS.c.id == bindparam("id"))
    .values(claims=_LINKS.c.claims + 1, updated_at=bindparam("now"))
)
REVOKE = (
    update(_LINKS)
    .where(_LINKS.c.id == bindparam("id"), _LINKS.c.revoked_at.is_(None))
    .values(revoked_at=bindparam("now"), updated_at=bindparam("now"))
)
REQUIRES_ACTIVATION = select(table_of(Project).c.require_activation).where(
    table_of(Project).c.id == bindparam("id")
)


async def read_link(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, link_id: uuid.UUID
) -> Any | None:
    return await rows.first(_LINK, project_id=project_id, product_id=product_id, id=link_id)


async def read_links(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, paging: PageParams
) -> tuple[list[Any], int] | None:
    """A page of the product's links (oldest first) and their total; None without the product."""
    keys = {"project_id": project_id, "product_id": product_id}
    if await rows.scalar(_PRODUCT_EXISTS, **keys) is None:
        return None
    total = await rows.scalar(_LINK_TOTAL, **keys)
    page = await rows.all(_LINK_PAGE, **keys, limit=paging.limit, offset=paging.offset)
    return page, total


async def read_offer(rows: Rows, digest: str) -> Any | None:
    return await rows.first(_OFFER, digest=digest)


async def read_link_by_token(rows: Rows, digest: str) -> Any | None:
    """The ``id`` and ``project_id`` of the link whose token has ``digest``."""
    return await rows.first(_LINK_BY_TOKEN, digest=digest)
