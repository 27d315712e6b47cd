"""Use-cases run again when PostgreSQL aborts their transaction to let another one through.

PostgreSQL ends a deadlock by aborting one of the transactions in it (SQLSTATE 40P01), and, at
REPEATABLE READ or above, a transaction whose reads another's commit made stale (40001). The
aborted transaction's writes are rolled back, and the same work tried again a moment later
normally passes. ``Database.transaction`` turns both into ``TransactionConflict``;
``rerun_on_conflict`` runs the whole use-case again on it, ``ATTEMPTS`` times in all, each
after a random pause below a bound that doubles (full jitter: two use-cases that met once do
not meet again in step). After the last attempt the conflict reaches the caller: a request
answers 503 with ``Retry-After`` (``errors.TransactionConflict``), never 500.

A use-case it wraps must be safe to run again from its start: it owns one transaction, and
nothing it does before its commit outside the database changes anything (reading a chain is
fine; sending an email is not, which is why emails are rows of the outbox). An
``Idempotency-Key`` still answers once: the rerun happens inside the request, whose one answer
is kept.

Tessera's use-cases take their row locks in one order (docs/design.md), so this is the net
under a mistake, not the way concurrent writes are ordered. ``tessera_db_conflicts_total``
counts what it catches: ``rerun`` when a use-case ran again, ``refused`` when its last attempt
failed too. SQLite cannot deadlock (one writer at a time); its wrapped use-cases run once.
"""

from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from prometheus_client import Counter
from tenacity import (
    RetryCallState,
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from tessera.errors import TransactionConflict

P = ParamSpec("P")
T = TypeVar("T")

ATTEMPTS = 5
FIRST_PAUSE_SECONDS = 0.02  # the first pause is below this, the next below twice as much, ...
LONGEST_PAUSE_SECONDS = 0.5

# Not registered anywhere: a scrape collects it (tessera.instruments.process), as the request
# counters.
CONFLICTS = Counter(
    "tessera_db_conflicts",
    "Transactions PostgreSQL aborted as a deadlock or a serialization failure, by what became "
    "of their use-case: rerun (it ran again), refused (its last attempt failed too: 503).",
    ["outcome"],
    registry=None,
)
_RERUN, _REFUSED = CONFLICTS.labels("rerun"), CONFLICTS.labels("refused")


def _rerun(_state: RetryCallState) -> None:
    _RERUN.inc()


def _refuse(state: RetryCallState) -> None:
    _REFUSED.inc()
    assert state.outcome is not None
    state.outcome.result()  # raises the last attempt's TransactionConflict


def rerun_on_conflict(use_case: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """``use_case`` run again, whole, when its transaction is aborted as a conflict (see the
    module docstring)."""
    rerun = retry(
        retry=retry_if_exception_type(TransactionConflict),
        stop=stop_after_attempt(ATTEMPTS),
        wait=wait_random_exponential(multiplier=FIRST_PAUSE_SECONDS, max=LONGEST_PAUSE_SECONDS),
        before_sleep=_rerun,
        retry_error_callback=_refuse,
    )
    return rerun(use_case)
