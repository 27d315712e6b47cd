"""Moving-window limits (the claim and sign-in limits), kept in the database so that a limit
holds across every process and host that shares it.

An attempt names one window per limit it is held to (a key and how many attempts the key may
make in ``span`` seconds). It is let through only when every window has room, and then counted
in each; a refused attempt is counted in none. ``rate_hits`` keeps one row per attempt counted,
until it leaves its window. A key's expired rows go when the key is counted again, and the
job worker sweeps the rest (``sweep``), so the table holds about the attempts of the last
window.

- PostgreSQL: one statement, ``admit_rate_hits`` (migration 0025), which locks the keys (a
  transaction-level advisory lock each, in one order), tests every window, and counts the
  attempt in all or none: one round trip, atomic across processes.
- SQLite: one write transaction; ``BEGIN IMMEDIATE`` holds the whole database, so a second
  ``tessera serve`` process on the same file waits for it.

Keys are stored hashed: a claim link's token is a secret, an address is personal, and a key
of any length fits the column.
"""

import hashlib
import time
from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import ARRAY, Float, Integer, Text, bindparam, column, delete, func, insert, select

from tessera.db.compiled import table_of
from tessera.db.database import Database
from tessera.db.rows import Rows
from tessera.db.sql import skip_locked
from tessera.models import RateHit

_HITS = table_of(RateHit)

_ADMITTED = func.admit_rate_hits(
    bindparam("keys", type_=ARRAY(Text())),
    bindparam("limits", type_=ARRAY(Integer())),
    bindparam("at", type_=Float()),
    bindparam("span", type_=Float()),
).table_valued(column("refused", Integer()), column("retry_after", Float()))
_ADMIT = select(_ADMITTED.c.refused, _ADMITTED.c.retry_after)

# SQLite's path, in one write transaction: the ``limit``-th newest hit still in the window
# (none: there is room), then the key's expired hits pruned and the new hit counted.
_BOUNDARY = (
    select(_HITS.c.expires)
    .where(_HITS.c.key == bindparam("key"), _HITS.c.expires > bindparam("at", type_=Float()))
    .order_by(_HITS.c.expires.desc())
    .limit(1)
    .offset(bindparam("skip", type_=Integer()))
)
_PRUNE = delete(_HITS).where(_HITS.c.key == bindparam("key"), _HITS.c.expires <= bindparam("at"))
_HIT = insert(_HITS).values(key=bindparam("key"), expires=bindparam("expires"))
# Rows an admission is deleting meanwhile are skipped: the sweep never waits for one, so the
# two never wait for each other.
_SWEEP = delete(_HITS).where(
    _HITS.c.id.in_(skip_locked(select(_HITS.c.id).where(_HITS.c.expires <= bindparam("at"))))
)


class Window(NamedTuple):
    """A limit an attempt is held to: at most ``limit`` attempts of ``kind`` (a claim's
    address, a claim link...) with this ``value`` in the moving window."""

    kind: str
    value: str
    limit: int


class Refusal(NamedTuple):
    """The first full window of a refused attempt (its index) and the seconds until it has
    room again."""

    window: int
    retry_after: float


class _Admitted(NamedTuple):
    refused: int | None
    retry_after: float | None


async def admit(
    database: Database, windows: Sequence[Window], *, span: float, now: float | None = None
) -> Refusal | None:
    """Count one attempt in every window of ``span`` seconds, or, when one is full, in none and
    say which (the first full one, in the order given)."""
    at = time.time() if now is None else now
    keys = tuple(_key(window) for window in windows)
    limits = tuple(window.limit for window in windows)
    if database.is_sqlite:
        return await _admit_in_transaction(database, keys, limits, at, span)
    admitted = await database.read(_admit_row, keys, limits, at, span)
    if admitted.refused is None:
        return None
    return Refusal(admitted.refused, admitted.retry_after or span)


async def sweep(database: Database) -> int:
    """Delete the hits that have left their windows (a chore of the job worker): a key counted
    again prunes its own, this takes those of the keys not seen since. How many."""
    async with database.transaction() as tx:
        swept = await tx.execute(_SWEEP, at=time.time())
        await tx.commit()
    return swept


def _key(window: Window) -> str:
    digest = hashlib.blake2b(window.value.encode(), digest_size=16).hexdigest()
    return f"{window.kind}:{digest}"


async def _admit_row(
    rows: Rows, keys: tuple[str, ...], limits: tuple[int, ...], at: float, span: float
) -> _Admitted:
    """PostgreSQL: the whole admission, one statement (in autocommit: its own transaction)."""
    admitted = await rows.first(_ADMIT, _Admitted, keys=keys, limits=limits, at=at, span=span)
    assert admitted is not None  # the function answers one row
    return admitted


async def _admit_in_transaction(
    database: Database, keys: tuple[str, ...], limits: tuple[int, ...], at: float, span: float
) -> Refusal | None:
    """SQLite: every window tested, then the attempt counted in each, in one write transaction
    (which holds the database: no other process counts meanwhile)."""
    async with database.transaction() as tx:
        for index, (key, limit) in enumerate(zip(keys, limits, strict=True)):
            if limit < 1:
                return Refusal(index, span)
            boundary = await tx.scalar(_BOUNDARY, key=key, at=at, skip=limit - 1)
            if boundary is not None:
                return Refusal(index, boundary - at)
        for key in keys:
            await tx.execute(_PRUNE, key=key, at=at)
        await tx.execute_many(_HIT, [{"key": key, "expires": at + span} for key in keys])
        await tx.commit()
    return None
