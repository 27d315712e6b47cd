"""Check-in key statements: a project's live keys (newest first), one added, one retired; the
projects without a live key."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, select, update

from tessera.db import Rows, Transaction, table_of
from tessera.models import CheckinKey, Project

_KEYS, _PROJECTS = table_of(CheckinKey), table_of(Project)


class CheckinKeyRow(NamedTuple):
    project_id: uuid.UUID
    kid: str
    public_key: bytes
    secret_key_id: str
    secret_blob: bytes
    created_at: datetime
    retired_at: datetime | None
    id: uuid.UUID


_OF_PROJECT = (
    select(_KEYS)
    .where(_KEYS.c.project_id == bindparam("project_id"))
    .order_by(_KEYS.c.created_at.desc(), _KEYS.c.id.desc())
)
_LIVE = _OF_PROJECT.where(_KEYS.c.retired_at.is_(None))
_NEWEST_LIVE = _LIVE.limit(1)
_PROJECT = select(_PROJECTS.c.id).where(_PROJECTS.c.id == bindparam("project_id"))
_WITHOUT_LIVE_KEY = select(_PROJECTS.c.id).where(
    ~select(_KEYS.c.id)
    .where(_KEYS.c.project_id == _PROJECTS.c.id, _KEYS.c.retired_at.is_(None))
    .exists()
)
_RETIRE = (
    update(_KEYS)
    .where(
        _KEYS.c.project_id == bindparam("project_id"),
        _KEYS.c.kid == bindparam("kid"),
        _KEYS.c.retired_at.is_(None),
    )
    .values(retired_at=bindparam("now"))
    .returning(*_KEYS.c)
)


async def all_keys(rows: Rows, project_id: uuid.UUID) -> list[CheckinKeyRow]:
    """The project's keys, retired ones too, newest first."""
    return await rows.all(_OF_PROJECT, CheckinKeyRow, project_id=project_id)


async def live_keys(rows: Rows, project_id: uuid.UUID) -> list[CheckinKeyRow]:
    """The keys that verify, newest (the one that signs) first."""
    return await rows.all(_LIVE, CheckinKeyRow, project_id=project_id)


async def signing_key(rows: Rows, project_id: uuid.UUID) -> CheckinKeyRow | None:
    return await rows.first(_NEWEST_LIVE, CheckinKeyRow, project_id=project_id)


async def project_exists(rows: Rows, project_id: uuid.UUID) -> bool:
    return await rows.scalar(_PROJECT, project_id=project_id) is not None


class ProjectId(NamedTuple):
    id: uuid.UUID


async def projects_without_live_key(rows: Rows) -> list[uuid.UUID]:
    return [row.id for row in await rows.all(_WITHOUT_LIVE_KEY, ProjectId)]


async def add_key(tx: Transaction, values: dict[str, Any]) -> CheckinKeyRow | None:
    """The key, unless the project has one of that kid already (then None)."""
    return await tx.insert_new(CheckinKey, values, CheckinKeyRow, unique=("project_id", "kid"))


async def retire(
    tx: Transaction, project_id: uuid.UUID, kid: str, now: datetime
) -> CheckinKeyRow | None:
    """The live key ``kid`` retired now (None: no such live key)."""
    return await tx.first(_RETIRE, CheckinKeyRow, project_id=project_id, kid=kid, now=now)
