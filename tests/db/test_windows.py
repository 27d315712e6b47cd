"""Moving windows in the database (``db.windows``), the claim and sign-in limits' counts, on the
suite's backend: every window tested before any is counted, a refusal counted nowhere, the
window moving on, old rows pruned, and the count exact when processes admit at once."""

import asyncio
import time

from sqlalchemy import func, select

from tessera.db import Database
from tessera.db.windows import Refusal, Window, admit, sweep
from tessera.models import RateHit
from tests import orm
from tests.conftest import database_at

T0 = 1_800_000_000.0


async def hits(database: Database) -> int:
    async with orm.session(database, write=False) as session:
        return await session.scalar(select(func.count()).select_from(RateHit)) or 0


def address(limit: int, value: str = "10.0.0.1") -> Window:
    return Window("address", value, limit)


def link(limit: int, value: str = "tcl_one") -> Window:
    return Window("link", value, limit)


class TestOneWindow:
    async def test_the_limit_then_a_refusal_with_the_time_to_wait(self, database):
        admitted = [
            await admit(database, [address(3)], span=60, now=T0 + second) for second in (0, 1, 2)
        ]
        assert admitted == [None, None, None]
        assert await admit(database, [address(3)], span=60, now=T0 + 10) == Refusal(0, 50.0)
        # Another value of the kind, and another kind of the value, are not held back.
        assert await admit(database, [address(3, "10.0.0.2")], span=60, now=T0 + 10) is None
        assert await admit(database, [Window("other", "10.0.0.1", 3)], span=60, now=T0) is None

    async def test_the_window_moves_on_one_attempt_at_a_time(self, database):
        for second in (0, 20, 40):
            assert await admit(database, [address(3)], span=60, now=T0 + second) is None
        assert await admit(database, [address(3)], span=60, now=T0 + 59.9) is not None
        # The first attempt leaves the window at 60 s: room for one, not two.
        assert await admit(database, [address(3)], span=60, now=T0 + 60.1) is None
        assert await admit(database, [address(3)], span=60, now=T0 + 60.2) == Refusal(
            0, (T0 + 80) - (T0 + 60.2)
        )

    async def test_a_refused_attempt_is_not_counted(self, database):
        assert await admit(database, [address(2)], span=60, now=T0) is None
        assert await admit(database, [address(2)], span=60, now=T0 + 1) is None
        for second in range(2, 50):
            assert await admit(database, [address(2)], span=60, now=T0 + second) is not None
        # Once the two counted attempts have left, the 48 refused ones hold nothing back.
        assert await admit(database, [address(2)], span=60, now=T0 + 61.5) is None
        assert await admit(database, [address(2)], span=60, now=T0 + 61.6) is None
        assert await hits(database) == 2  # the expired ones pruned as the key was counted

    async def test_a_limit_of_zero_refuses_all(self, database):
        assert await admit(database, [address(0)], span=60, now=T0) == Refusal(0, 60)
        assert await hits(database) == 0


class TestTwoWindows:
    async def test_both_tested_before_either_is_counted(self, database):
        assert await admit(database, [address(5), link(1)], span=60, now=T0) is None
        # The link is full: the address is not counted for the refused attempt...
        for second in (1, 2, 3, 4, 5):
            refusal = await admit(database, [address(5), link(1)], span=60, now=T0 + second)
            assert refusal == Refusal(1, 60 - second)
        # ...so it still has room for four on other links.
        others = [
            await admit(database, [address(5), link(1, f"tcl_{n}")], span=60, now=T0 + 6)
            for n in range(5)
        ]
        assert others == [None, None, None, None, Refusal(0, 54.0)]
        assert await hits(database) == 2 * 5

    async def test_the_first_full_window_is_named(self, database):
        assert await admit(database, [address(1), link(1)], span=60, now=T0) is None
        assert await admit(database, [address(1), link(1)], span=60, now=T0 + 1) == Refusal(0, 59.0)
        refusal = await admit(database, [address(1, "10.0.0.9"), link(1)], span=60, now=T0 + 1)
        assert refusal == Refusal(1, 59.0)


class TestAcrossProcesses:
    async def test_many_attempts_at_once_from_two_processes_count_exactly(
        self, database, database_url
    ):
        """Two databases (as two processes have), 40 attempts at once each: exactly the limit
        is let through, and the link's count agrees with the addresses'."""
        other = database_at(database_url, pool_size=10, max_overflow=0)
        try:

            async def attempt(on: Database, n: int) -> bool:
                windows = [address(7, f"10.0.0.{n % 3}"), link(12)]
                return await admit(on, windows, span=60) is None

            results = await asyncio.gather(
                *(attempt(database if n % 2 else other, n) for n in range(80))
            )
        finally:
            await other.dispose()
        assert sum(results) == 12  # the link's limit, under the three addresses' 21
        assert await hits(database) == 2 * 12


class TestSweep:
    async def test_only_the_hits_that_left_their_window_go(self, database):
        an_hour_ago = time.time() - 3600
        assert await admit(database, [address(5, "gone")], span=60, now=an_hour_ago) is None
        assert await admit(database, [address(5, "kept")], span=3600) is None
        assert await sweep(database) == 1
        assert await hits(database) == 1
