"""Rate limits per credential: a token bucket for reads and one for writes.

``TESSERA_RATE_LIMIT_READ`` and ``TESSERA_RATE_LIMIT_WRITE`` are requests per second per
credential (an API key, a token client, an OIDC subject); each bucket holds one second's worth,
so a burst of that many goes through at once. 0 (the default) turns a limit off and costs
nothing. Over the limit: 429 ``{message}`` with ``Retry-After`` and ``RateLimit-*``, and the
refused request takes no token. Another credential is never slowed.

On PostgreSQL the buckets are rows (``rate_buckets``), refilled and taken from in one statement,
so the limit holds across processes and hosts (one round trip more per request while a limit is
on). On SQLite, one machine, they live in each process's memory.
"""

import math
import time
from dataclasses import dataclass

from sqlalchemy import bindparam, func, select
from sqlalchemy.dialects.postgresql import insert

from tessera.auth.principal import Principal
from tessera.db import Database, Rows, table_of
from tessera.errors import TooManyRequests
from tessera.models import RateBucket

_BUCKETS = table_of(RateBucket)
_refilled = func.least(
    bindparam("size"), _BUCKETS.c.tokens + (bindparam("now") - _BUCKETS.c.at) * bindparam("rate")
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


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    def __init__(self, *, read: float, write: float) -> None:
        self.rates = {False: read, True: write}
        self.on = bool(read or write)
        self._memory: dict[str, _Bucket] = {}

    async def admit(self, database: Database, principal: Principal, *, write: bool) -> None:
        """Take a token from the credential's bucket, or raise ``TooManyRequests``."""
        rate = self.rates[write]
        if not rate:
            return
        key = f"{'write' if write else 'read'}:{principal.credential}"
        size, now = max(rate, 1.0), time.time()
        if database.is_sqlite:
            left = self._take(key, rate, size, now)
        else:
            left = await database.read(_take, key, rate, size, now)
        if left is not None:  # the tokens there are, less than one
            raise TooManyRequests(
                f"rate limit of {rate:g} {'write' if write else 'read'} requests a second for "
                "this credential",
                retry_after=max(1, math.ceil((1 - left) / rate)),
                limit=math.ceil(rate),
            )

    def _take(self, key: str, rate: float, size: float, now: float) -> float | None:
        bucket = self._memory.get(key)
        if bucket is None:
            bucket = self._memory[key] = _Bucket(size, now)
        tokens = min(size, bucket.tokens + (now - bucket.at) * rate)
        if tokens < 1:
            return tokens
        bucket.tokens, bucket.at = tokens - 1, now
        return None


async def _take(rows: Rows, key: str, rate: float, size: float, now: float) -> float | None:
    """None when a token was taken (in autocommit: one statement), else the tokens left."""
    params = {"key": key, "rate": rate, "size": size, "now": now}
    if await rows.first(_TAKE, **params) is not None:
        return None
    left: float = await rows.scalar(_LEFT, **params)
    return left
