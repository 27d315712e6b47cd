"""A user's reputation: its points, the history of every move, and the batch that adds a point
to many users at once."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, select, update

from tessera.db import NotIndexed, Rows, Transaction, lock_for_update, table_of
from tessera.errors import ReputationWouldBeNegative
from tessera.models import ReputationEntry, User
from tessera.models.base import utcnow
from tessera.schemas import PageParams, Pagination
from tessera.users.repository import UserRow, get_user_row
from tessera.users.schemas import ReputationHistory, UserRef


class ReputationRow(NamedTuple):
    id: uuid.UUID
    reputation: int


_ROWS = table_of(User)

# By their ids, through the primary key (see ``users.repository``).
_REPUTATIONS = select(_ROWS.c.id, _ROWS.c.reputation).where(
    NotIndexed(_ROWS.c.project_id) == bindparam("project_id"),
    _ROWS.c.id.in_(bindparam("ids", expanding=True)),
)


async def read_reputations(
    rows: Rows, project_id: uuid.UUID, ids: list[uuid.UUID]
) -> dict[uuid.UUID, int]:
    """The reputation balances of the project's users ``ids`` (a listing leaves them out)."""
    if not ids:
        return {}
    found = await rows.all(_REPUTATIONS, ReputationRow, project_id=project_id, ids=ids)
    return {row.id: row.reputation for row in found}


_ADD_REPUTATION = (
    update(_ROWS)
    .where(_ROWS.c.id == bindparam("id"), _ROWS.c.reputation + bindparam("delta") >= 0)
    .values(reputation=_ROWS.c.reputation + bindparam("delta"), updated_at=bindparam("now"))
    .returning(_ROWS.c.reputation)
)


class ReputationEntryRow(NamedTuple):
    """A reputation entry's row (``reputation_entries``), as ``ReputationRead`` reads it."""

    id: uuid.UUID
    project_id: uuid.UUID
    user_id: uuid.UUID
    delta: int
    balance: int
    reason: str
    created_at: datetime


async def add_reputation(
    tx: Transaction, user: UserRow, *, delta: int, reason: str
) -> ReputationEntryRow:
    """Atomically move a user's balance (never below 0) and record the entry (the entry, as
    written)."""
    [entry] = await tx.insert(
        ReputationEntry, [await _moved(tx, user, delta, reason)], ReputationEntryRow
    )
    return entry


async def _moved(tx: Transaction, user: UserRow, delta: int, reason: str) -> dict[str, Any]:
    """The user's balance moved by ``delta`` (never below 0): the entry that records it."""
    balance = await tx.scalar(_ADD_REPUTATION, id=user.id, delta=delta, now=utcnow())
    if balance is None:
        raise ReputationWouldBeNegative(
            f"reputation balance cannot go below 0 (balance {user.reputation}, delta {delta})"
        )
    values = {"project_id": user.project_id, "user_id": user.id, "delta": delta, "reason": reason}
    return values | {"balance": balance}


_LOCK_USERS = lock_for_update(
    select(_ROWS.c.id).where(_ROWS.c.id.in_(bindparam("ids", expanding=True))).order_by(_ROWS.c.id)
)
_ADD_ONE_EACH = (
    update(_ROWS)
    .where(_ROWS.c.id.in_(bindparam("ids", expanding=True)))
    .values(reputation=_ROWS.c.reputation + 1, updated_at=bindparam("now"))
    .returning(_ROWS.c.id, _ROWS.c.reputation)
)


class UserId(NamedTuple):
    id: uuid.UUID


class Balance(NamedTuple):
    id: uuid.UUID
    reputation: int


async def add_a_point_each(
    tx: Transaction, users: Sequence[UserRow], *, reason: str, now: datetime
) -> None:
    """One reputation point more for each of ``users`` (a first check-in's), their rows locked
    in id order first (two transactions that add to some of the same never wait for each other
    in turn), each entry written with the transaction's staged rows."""
    if not users:
        return
    ids = sorted({user.id for user in users})
    await tx.all(_LOCK_USERS, UserId, ids=ids)
    balances = await tx.all(_ADD_ONE_EACH, Balance, ids=ids, now=now)
    project_of = {user.id: user.project_id for user in users}
    tx.stage(
        ReputationEntry,
        [
            {
                "project_id": project_of[row.id],
                "user_id": row.id,
                "delta": 1,
                "reason": reason,
                "balance": row.reputation,
            }
            for row in balances
        ],
    )


async def move_reputation(tx: Transaction, user: UserRow, *, delta: int, reason: str) -> None:
    """``add_reputation`` whose entry is written with the transaction's staged rows, at its
    commit (a check-in's: nothing reads the entry before)."""
    tx.stage(ReputationEntry, [await _moved(tx, user, delta, reason)])


class EntryRow(NamedTuple):
    """A reputation entry as ``ReputationEntryRead`` reads it."""

    delta: int
    balance: int
    reason: str
    created_at: datetime


_ENTRIES = table_of(ReputationEntry)
_ENTRY_TOTAL = select(func.count()).where(_ENTRIES.c.user_id == bindparam("user_id"))
_ENTRY_PAGE = (
    select(_ENTRIES.c.delta, _ENTRIES.c.balance, _ENTRIES.c.reason, _ENTRIES.c.created_at)
    .where(_ENTRIES.c.user_id == bindparam("user_id"))
    .order_by(_ENTRIES.c.created_at, _ENTRIES.c.id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)


async def read_reputation_history(
    rows: Rows, project_id: uuid.UUID, ref: UserRef, paging: PageParams
) -> ReputationHistory:
    """The user's reputation balance and a page of its entries, oldest first (a read for
    ``Database.read``). 404 when the project has no such user."""
    user = await get_user_row(rows, project_id, ref)
    total = await rows.scalar(_ENTRY_TOTAL, user_id=user.id)
    page = await rows.all(
        _ENTRY_PAGE, EntryRow, user_id=user.id, limit=paging.limit, offset=paging.offset
    )
    return ReputationHistory.model_validate(
        {
            "user_id": user.id,
            "balance": user.reputation,
            "entries": [row._asdict() for row in page],
            "pagination": Pagination(page=paging.page, limit=paging.limit, total=total),
        }
    )
