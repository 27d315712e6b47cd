"""Token buckets (the rate limits of ``auth.rate_limits``), kept where each backend can.

On PostgreSQL a bucket is a row (``rate_buckets``), refilled and taken from in one statement,
so a limit holds across processes and hosts (one round trip per take). On SQLite, one machine,
the buckets live in the memory of the process (of the ``TokenBuckets`` that holds them).
"""

from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import bindparam, func, select
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


class _Taken(NamedTuple):
    """The tokens a bucket kept when one was taken (``_TAKE``)."""

    tokens: float


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class TokenBuckets:
    """Buckets by key, each refilled at ``rate`` tokens a second up to ``size``."""

    def __init__(self) -> None:
        self._memory: dict[str, _Bucket] = {}

    async def take(
        self, database: Database, key: str, *, rate: float, size: float, now: float
    ) -> float | None:
        """Take a token from ``key``'s bucket (a new bucket starts full): None when one was
        taken, else the tokens there are (less than one), and nothing is taken."""
        if database.is_sqlite:
            return self._take_in_memory(key, rate, size, now)
        return await database.read(_take_row, key, rate, size, now)

    def _take_in_memory(self, key: str, rate: float, size: float, now: float) -> float | None:
        bucket = self._memory.get(key)
        if bucket is None:
            bucket = self._memory[key] = _Bucket(size, now)
        tokens = min(size, bucket.tokens + (now - bucket.at) * rate)
        if tokens < 1:
            return tokens
        bucket.tokens, bucket.at = tokens - 1, now
        return None


async def _take_row(rows: Rows, key: str, rate: float, size: float, now: float) -> float | None:
    """None when a token was taken (in autocommit: one statement), else the tokens left."""
    params = {"key": key, "rate": rate, "size": size, "now": now}
    if await rows.first(_TAKE, _Taken, **params) is not None:
        return None
    left: float = await rows.scalar(_LEFT, **params)
    return left
