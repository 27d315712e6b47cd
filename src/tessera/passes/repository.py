"""Wallet pass statements: the devices registered for passes (the PassKit web service), the
passes a device keeps and when each last changed, a holder's name, a project's logo."""

import uuid
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import bindparam, delete, select, update

from tessera.db import Rows, Transaction, table_of
from tessera.models import (
    Event,
    PassRegistration,
    Product,
    ProductItem,
    Project,
    ProjectLogo,
    User,
)
from tessera.tickets.repository import CHANGED_AT, last_change

_REGISTRATIONS, _ITEMS = table_of(PassRegistration), table_of(ProductItem)
_LOGOS, _USERS = table_of(ProjectLogo), table_of(User)
_PRODUCTS, _EVENTS, _PROJECTS = table_of(Product), table_of(Event), table_of(Project)


class Registered(NamedTuple):
    """A pass a device keeps, and when the rows it shows last changed."""

    serial: uuid.UUID
    item_updated_at: datetime
    product_updated_at: datetime
    holder_updated_at: datetime
    event_updated_at: datetime | None
    project_updated_at: datetime  # its name and its logo (``set_logo`` touches it)

    @property
    def changed_at(self) -> datetime:
        return last_change(*self[1:])


_RENEW = (
    update(_REGISTRATIONS)
    .where(
        _REGISTRATIONS.c.device == bindparam("device"),
        _REGISTRATIONS.c.serial == bindparam("serial"),
    )
    .values(owner_id=bindparam("owner_id"), push_token=bindparam("push_token"))
)
_UNREGISTER = delete(_REGISTRATIONS).where(
    _REGISTRATIONS.c.device == bindparam("device"), _REGISTRATIONS.c.serial == bindparam("serial")
)
_OWNERS = select(_REGISTRATIONS.c.owner_id).where(_REGISTRATIONS.c.serial == bindparam("serial"))
_DEVICE_OWNER = select(_REGISTRATIONS.c.owner_id).where(
    _REGISTRATIONS.c.device == bindparam("device"), _REGISTRATIONS.c.serial == bindparam("serial")
)
_REGISTERED = (
    select(_REGISTRATIONS.c.serial, *CHANGED_AT)
    .select_from(
        _REGISTRATIONS.join(_ITEMS, _ITEMS.c.id == _REGISTRATIONS.c.serial)
        .join(_PRODUCTS, _PRODUCTS.c.id == _ITEMS.c.product_id)
        .join(_USERS, _USERS.c.id == _ITEMS.c.owner_id)
        .join(_PROJECTS, _PROJECTS.c.id == _ITEMS.c.project_id)
        .outerjoin(_EVENTS, _EVENTS.c.id == _PRODUCTS.c.event_id)
    )
    .where(_REGISTRATIONS.c.device == bindparam("device"))
    .order_by(_REGISTRATIONS.c.serial)
)
_NAME = select(_USERS.c.first_name, _USERS.c.last_name).where(_USERS.c.id == bindparam("id"))
_LOGO = select(_LOGOS.c.png).where(_LOGOS.c.project_id == bindparam("project_id"))
_HAS_LOGO = select(_LOGOS.c.updated_at).where(_LOGOS.c.project_id == bindparam("project_id"))
_NEW_LOGO = (
    update(_LOGOS)
    .where(_LOGOS.c.project_id == bindparam("project_id"))
    .values(png=bindparam("png"), updated_at=bindparam("updated_at"))
)
_TOUCH_PROJECT = (
    update(_PROJECTS)
    .where(_PROJECTS.c.id == bindparam("project_id"))
    .values(updated_at=bindparam("now"))
)
_NO_LOGO = delete(_LOGOS).where(_LOGOS.c.project_id == bindparam("project_id"))


async def register(
    tx: Transaction, *, device: str, serial: uuid.UUID, owner_id: uuid.UUID, push_token: str
) -> bool:
    """The device keeps the pass current for its holder ``owner_id``: whether it is new (an
    existing registration takes the holder and push token given)."""
    row = {"device": device, "serial": serial, "owner_id": owner_id, "push_token": push_token}
    if await tx.insert_new(PassRegistration, row, unique=("device", "serial")):
        return True
    await tx.execute(_RENEW, device=device, serial=serial, owner_id=owner_id, push_token=push_token)
    return False


async def unregister(tx: Transaction, *, device: str, serial: uuid.UUID) -> None:
    await tx.execute(_UNREGISTER, device=device, serial=serial)


async def device_owner(rows: Rows, device: str, serial: uuid.UUID) -> uuid.UUID | None:
    """The holder the device registered the pass for, or None without a registration."""
    owner: uuid.UUID | None = await rows.scalar(_DEVICE_OWNER, device=device, serial=serial)
    return owner


async def registered_owners(rows: Rows, serial: uuid.UUID) -> set[uuid.UUID]:
    """The holders the pass's devices registered it for (earlier holders among them)."""
    return {row.owner_id for row in await rows.all(_OWNERS, _Owner, serial=serial)}


async def registered(rows: Rows, device: str) -> list[Registered]:
    """The passes the device keeps (a person's tickets: a handful), with their changes."""
    return await rows.all(_REGISTERED, Registered, device=device)


async def holder_name(rows: Rows, user_id: uuid.UUID) -> str | None:
    """The user's name as a ticket shows it (never the email); None without one."""
    found = await rows.first(_NAME, _Name, id=user_id)
    return None if found is None else " ".join(n for n in found if n) or None


async def logo_of(rows: Rows, project_id: uuid.UUID) -> bytes | None:
    png: bytes | None = await rows.scalar(_LOGO, project_id=project_id)
    return png


async def has_logo(rows: Rows, project_id: uuid.UUID) -> bool:
    return await rows.scalar(_HAS_LOGO, project_id=project_id) is not None


async def set_logo(
    tx: Transaction, project_id: uuid.UUID, png: bytes | None, now: datetime
) -> None:
    """The project's logo becomes ``png`` (None: none, Tessera's mark). The project counts as
    changed, so that its passes do too (``registered``)."""
    await tx.execute(_TOUCH_PROJECT, project_id=project_id, now=now)
    if png is None:
        await tx.execute(_NO_LOGO, project_id=project_id)
        return
    row = {"project_id": project_id, "png": png, "updated_at": now}
    if not await tx.insert_new(ProjectLogo, row, unique=("project_id",)):
        await tx.execute(_NEW_LOGO, **row)


class _Owner(NamedTuple):
    owner_id: uuid.UUID


class _Name(NamedTuple):
    first_name: str | None
    last_name: str | None
