"""How often claims may be tried: per client address and per link, in a moving minute.

Kept in the process's memory (the ``limits`` library): with several processes behind a load
balancer each one counts on its own, so the effective limit is up to that many times the
setting. Every attempt that is let through counts, whatever its outcome (a refusal must cost an
attacker as much as a success); an attempt refused here is not counted, so a client that keeps
knocking is let in again as its minute moves on, and it never holds back another address or link.
"""

import math
import time
from typing import Annotated

from fastapi import Depends, Request
from limits import RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from tessera.errors import TooManyClaims


class ClaimLimiter:
    def __init__(self, *, per_address: int, per_link: int, window_seconds: int = 60) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._per_address = RateLimitItemPerSecond(per_address, window_seconds)
        self._per_link = RateLimitItemPerSecond(per_link, window_seconds)
        self._window = "a minute" if window_seconds == 60 else f"in {window_seconds} s"

    def admit(self, *, address: str, link: str) -> None:
        """Count one attempt, or raise ``TooManyClaims`` (429 with Retry-After) and count none.

        Both limits are tested before either is hit: no await in between, so on one event loop
        no other attempt comes between the test and the count."""
        limits = [
            (self._per_address, ("claim-address", address), "this address"),
            (self._per_link, ("claim-link", link), "this link"),
        ]
        for item, keys, what in limits:
            if not self._limiter.test(item, *keys):
                reset_at = self._limiter.get_window_stats(item, *keys).reset_time
                raise TooManyClaims(
                    f"too many claims from {what}: at most {item.amount} {self._window}",
                    retry_after=max(1, math.ceil(reset_at - time.time())),
                )
        for item, keys, _ in limits:
            self._limiter.hit(item, *keys)


async def claim_limiter(request: Request) -> ClaimLimiter:
    limiter: ClaimLimiter = request.app.state.claim_limiter
    return limiter


ClaimLimiterDep = Annotated[ClaimLimiter, Depends(claim_limiter)]
