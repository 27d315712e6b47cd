"""Rate limits per credential: a token bucket for reads and one for writes.

``TESSERA_RATE_LIMIT_READ`` and ``TESSERA_RATE_LIMIT_WRITE`` are requests per second per
credential (an API key, a token client, an OIDC subject); each bucket holds one second's worth,
so a burst of that many goes through at once. 0 (the default) turns a limit off and costs
nothing. Over the limit: 429 ``{message}`` with ``Retry-After`` and ``RateLimit-*``, and the
refused request takes no token. Another credential is never slowed.

The buckets are rows (``rate_buckets``, ``tessera.db.buckets``), so a limit holds across every
process and host that shares the database: one statement more per request while a limit is on
(on SQLite a short write transaction, which holds the file for a moment).

The console's sign-ins are limited per client address (``SignInLimiter``), counted in the
database too.
"""

import math
import time

from tessera.auth.principal import Principal
from tessera.db import Database
from tessera.db.buckets import TokenBuckets
from tessera.db.windows import Window, admit
from tessera.errors import TooManyRequests


class RateLimiter:
    def __init__(self, *, read: float, write: float) -> None:
        self.rates = {False: read, True: write}
        self.on = bool(read or write)
        self._buckets = TokenBuckets()

    async def admit(self, database: Database, principal: Principal, *, write: bool) -> None:
        """Take a token from the credential's bucket, or raise ``TooManyRequests``."""
        rate = self.rates[write]
        if not rate:
            return
        key = f"{'write' if write else 'read'}:{principal.credential}"
        left = await self._buckets.take(
            database, key, rate=rate, size=max(rate, 1.0), now=time.time()
        )
        if left is not None:  # the tokens there are, less than one
            raise TooManyRequests(
                f"rate limit of {rate:g} {'write' if write else 'read'} requests a second for "
                "this credential",
                retry_after=max(1, math.ceil((1 - left) / rate)),
                limit=math.ceil(rate),
            )


class SignInLimiter:
    """Sign-in attempts per client address, a moving minute counted in the database (as the
    claim limits, ``db.windows``), so it holds across processes: on top of each account's
    lockout, so that guessing across many accounts is slow too. A refused attempt is not
    counted."""

    def __init__(self, per_minute: int = 20) -> None:
        self._per_minute = per_minute

    async def admit(self, database: Database, *, address: str) -> None:
        window = Window("console-sign-in", address, self._per_minute)
        refusal = await admit(database, [window], span=60)
        if refusal is not None:
            raise TooManyRequests(
                "too many sign-in attempts from this address: try again in a minute",
                retry_after=max(1, math.ceil(refusal.retry_after)),
            )
