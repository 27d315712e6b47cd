"""Token buckets (the rate limits of ``auth.rate_limits``), rows of ``rate_buckets`` that
every process sharing the database takes from, so a limit holds across processes and hosts.

On PostgreSQL a bucket is refilled and taken from in one statement (one round trip per take).
On SQLite a take is a write transaction of its own (read, then write): ``BEGIN IMMEDIATE``
holds the whole database, so another ``tessera serve`` process on the same file waits for it.
"""

from typing import NamedTuple

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.dialects.postgresql import insert

from tessera.db.compiled import table_of
from tessera.db.database import Database
from tessera.db.rows import Rows
from tessera.models import RateBucket

_BUCKETS = table_of(RateBucket)
_TOKENS = _BUCKETS.c.tokens.type
_refilled = func.least(
    bindparam("size", type_=_TOKENS),
    _BUCKETS.c.tokens + (bindparam("now") - _BUCKETS.c.at) * bindparam("rate", type_=_TOKENS),
)
# Take a token when there is one (a new bucket starts full); nothing when there is none.
_TAKE = (
    insert(_BUCKETS)
    .values(key=bindparam("key"), tokens=bindparam("size") - 1, at=bindparam("now"))
    .on_conflict_do_update(
        index_elements=[_BUCKETS.c.key],
        set_={"tokens": _refilled - 1, "at": bindparam("now")},
        where=_refilled >= 1,
    )
    .returning(_BUCKETS.c.tokens)
)
_LEFT = select(_refilled).where(_BUCKETS.c.key == bindparam("key"))
# SQLite's: the bucket as it was last taken from, then the bucket after this take.
_BUCKET = select(_BUCKETS.c.tokens, _BUCKETS.c.at).where(_BUCKETS.c.key == bindparam("key"))
_REFILL = (
    update(_BUCKETS)
    .where(_BUCKETS.c.key == bindparam("key"))
    .values(tokens=bindparam("tokens"), at=bindparam("now"))
)


class _Taken(NamedTuple):
    """The tokens a bucket kept when one was taken (``_TAKE``)."""

    tokens: float


class _Bucket(NamedTuple):
    tokens: float
    at: float


class TokenBuckets:
    """Buckets by key, each refilled at ``rate`` tokens a second up to ``size``."""

    async def take(
        self, database: Database, key: str, *, rate: float, size: float, now: float
    ) -> float | None:
        """Take a token from ``key``'s bucket (a new bucket starts full): None when one was
        taken, else the tokens there are (less than one), and nothing is taken."""
        if database.is_sqlite:
            return await _take_in_transaction(database, key, rate, size, now)
        return await database.read(_take_row, key, rate, size, now)


async def _take_row(rows: Rows, key: str, rate: float, size: float, now: float) -> float | None:
    """None when a token was taken (in autocommit: one statement), else the tokens left."""
    params = {"key": key, "rate": rate, "size": size, "now": now}
    if await rows.first(_TAKE, _Taken, **params) is not None:
        return None
    left: float = await rows.scalar(_LEFT, **params)
    return left


async def _take_in_transaction(
    database: Database, key: str, rate: float, size: float, now: float
) -> float | None:
    """SQLite: the bucket read and written in one write transaction (which holds the
    database); a refusal writes nothing."""
    async with database.transaction() as tx:
        bucket = await tx.first(_BUCKET, _Bucket, key=key)
        tokens = size if bucket is None else min(size, bucket.tokens + (now - bucket.at) * rate)
        if tokens < 1:
            return tokens
        if bucket is None:
            await tx.insert(RateBucket, [{"key": key, "tokens": tokens - 1, "at": now}])
        else:
            await tx.execute(_REFILL, key=key, tokens=tokens - 1, now=now)
        await tx.commit()
    return None
