"""The claim limiter and the console's sign-in limiter on the suite's database: what each
refuses, with which message and wait, and that two processes (two databases, two limiters)
count together."""

import time

import pytest

from tessera.auth.rate_limits import SignInLimiter
from tessera.claims.limiter import ClaimLimiter
from tessera.db import windows
from tessera.errors import TooManyClaims, TooManyRequests
from tests.conftest import database_at


class Clock:
    """The windows' clock (their ``time.time()``), moved by the test alone: what counts within
    a window does not depend on how fast a loaded machine answers."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))  # whole seconds: a window's end is exact

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    frozen = Clock()
    monkeypatch.setattr(windows, "time", frozen)
    return frozen


class TestClaimLimiter:
    async def test_per_address(self, database, clock):
        limiter = ClaimLimiter(per_address=2, per_link=100)
        for link in ("tcl_a", "tcl_b"):
            await limiter.admit(database, address="10.1.0.1", link=link)
        with pytest.raises(TooManyClaims) as refused:
            await limiter.admit(database, address="10.1.0.1", link="tcl_c")
        assert refused.value.message == "too many claims from this address: at most 2 a minute"
        assert refused.value.retry_after == 60
        await limiter.admit(database, address="10.1.0.2", link="tcl_c")  # another address

    async def test_per_link(self, database, clock):
        limiter = ClaimLimiter(per_address=100, per_link=2, window_seconds=30)
        for address in ("10.2.0.1", "10.2.0.2"):
            await limiter.admit(database, address=address, link="tcl_a")
        with pytest.raises(TooManyClaims) as refused:
            await limiter.admit(database, address="10.2.0.3", link="tcl_a")
        assert refused.value.message == "too many claims from this link: at most 2 in 30 s"
        assert refused.value.retry_after == 30
        await limiter.admit(database, address="10.2.0.3", link="tcl_b")  # another link

    async def test_refused_attempts_are_not_counted_and_the_window_moves_on(self, database, clock):
        limiter = ClaimLimiter(per_address=2, per_link=3, window_seconds=1)
        await limiter.admit(database, address="10.3.0.1", link="tcl_a")
        await limiter.admit(database, address="10.3.0.1", link="tcl_a")
        for _ in range(5):  # the address is full: the link is not counted either
            with pytest.raises(TooManyClaims):
                await limiter.admit(database, address="10.3.0.1", link="tcl_a")
        await limiter.admit(database, address="10.3.0.2", link="tcl_a")  # the link's third
        with pytest.raises(TooManyClaims):
            await limiter.admit(database, address="10.3.0.2", link="tcl_a")
        # A second on, the first two have left the window; the refusals never entered it.
        clock.now += 1.1
        await limiter.admit(database, address="10.3.0.1", link="tcl_a")
        await limiter.admit(database, address="10.3.0.1", link="tcl_a")
        with pytest.raises(TooManyClaims):
            await limiter.admit(database, address="10.3.0.1", link="tcl_b")

    async def test_two_processes_count_together(self, database, database_url):
        other = database_at(database_url, pool_size=2, max_overflow=0)
        try:
            one = ClaimLimiter(per_address=3, per_link=100)
            two = ClaimLimiter(per_address=3, per_link=100)
            await one.admit(database, address="10.4.0.1", link="tcl_a")
            await two.admit(other, address="10.4.0.1", link="tcl_b")
            await one.admit(database, address="10.4.0.1", link="tcl_c")
            with pytest.raises(TooManyClaims):
                await two.admit(other, address="10.4.0.1", link="tcl_d")
        finally:
            await other.dispose()


class TestSignInLimiter:
    async def test_per_address_across_processes(self, database, database_url, clock):
        other = database_at(database_url, pool_size=2, max_overflow=0)
        try:
            for n in range(4):
                await SignInLimiter(per_minute=4).admit(
                    database if n % 2 else other, address="10.5.0.1"
                )
            with pytest.raises(TooManyRequests) as refused:
                await SignInLimiter(per_minute=4).admit(database, address="10.5.0.1")
            await SignInLimiter(per_minute=4).admit(other, address="10.5.0.2")
        finally:
            await other.dispose()
        assert refused.value.message == (
            "too many sign-in attempts from this address: try again in a minute"
        )
        assert refused.value.retry_after == 60
