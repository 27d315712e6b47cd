"""How often claims may be tried: per client address and per link, in a moving minute.

Counted in the database (``db.windows``), so a limit holds across every API process and host
that shares it: ``tessera serve --workers N`` lets an address make its limit of claims, not N
times it. Every attempt that is let through counts, whatever its outcome (a refusal must cost
an attacker as much as a success); an attempt refused here is not counted, so a client that
keeps knocking is let in again as its minute moves on, and it never holds back another address
or link. Both limits are tested before either is counted, atomically across processes.
"""

import math

from tessera.db import Database
from tessera.db.windows import Window, admit
from tessera.errors import TooManyClaims


class ClaimLimiter:
    def __init__(self, *, per_address: int, per_link: int, window_seconds: int = 60) -> None:
        self._per_address = per_address
        self._per_link = per_link
        self._span = window_seconds
        self._window = "a minute" if window_seconds == 60 else f"in {window_seconds} s"

    async def admit(self, database: Database, *, address: str, link: str) -> None:
        """Count one attempt, or raise ``TooManyClaims`` (429 with Retry-After) and count none."""
        windows = [
            Window("claim-address", address, self._per_address),
            Window("claim-link", link, self._per_link),
        ]
        refusal = await admit(database, windows, span=self._span)
        if refusal is not None:
            full = windows[refusal.window]
            what = "this address" if full.kind == "claim-address" else "this link"
            raise TooManyClaims(
                f"too many claims from {what}: at most {full.limit} {self._window}",
                retry_after=max(1, math.ceil(refusal.retry_after)),
            )
