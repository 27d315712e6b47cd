"""``Database.transaction``: the raw-driver write path of the hot use-cases, on both backends."""

import asyncio
import uuid
from collections import namedtuple
from typing import NamedTuple

import pytest
from sqlalchemy import bindparam, func, select, update
from sqlalchemy.exc import IntegrityError

from tessera.db import Database, table_of
from tessera.models import Attendee, Job, JobStatus, User
from tests.conftest import BACKEND
from tests.factories import create_event, create_user, row_counts

JOBS = table_of(Job)
JOB = select(JOBS).where(JOBS.c.id == bindparam("id"))
JobRow = namedtuple("JobRow", JOBS.c.keys())  # every column
AttendeeRow = namedtuple("AttendeeRow", table_of(Attendee).c.keys())


def job(tenant):
    return {"project_id": tenant.project_id, "kind": "test.job", "subject": "s", "payload": {}}


class TestTransaction:
    async def test_insert_fills_the_models_defaults_and_reads_back_what_it_wrote(
        self, database, tenant
    ):
        async with database.transaction() as tx:
            [written] = await tx.insert(Job, [job(tenant) | {"attempts": 0}], JobRow)
            await tx.commit()
        assert type(written) is JobRow
        assert isinstance(written.id, uuid.UUID)
        assert written.created_at == written.updated_at  # as TimestampMixin says
        assert written.status == JobStatus.QUEUED and written.last_error is None
        stored = await database.read(lambda rows: rows.first(JOB, JobRow, id=written.id))
        assert stored == written

    async def test_nothing_stays_without_commit_or_after_an_error(self, database, tenant):
        async with database.transaction() as tx:
            await tx.insert(Job, [job(tenant)])
        with pytest.raises(RuntimeError):
            async with database.transaction() as tx:
                await tx.insert(Job, [job(tenant)])
                raise RuntimeError("a rule refused")
        assert (await row_counts(database))["jobs"] == 0
        async with database.transaction() as tx:  # and the connection is fine for the next one
            await tx.insert(Job, [job(tenant)])
            await tx.commit()
        assert (await row_counts(database))["jobs"] == 1

    async def test_a_constraint_is_an_integrity_error_on_both_backends(self, database, tenant):
        with pytest.raises(IntegrityError):
            async with database.transaction() as tx:
                await tx.insert(Job, [job(tenant) | {"project_id": uuid.uuid4()}])  # no project
        assert (await row_counts(database))["jobs"] == 0

    async def test_insert_new_skips_a_row_that_exists(self, client, database, tenant):
        user = await create_user(client, tenant)
        event = await create_event(client, tenant)
        row = {
            "project_id": tenant.project_id,
            "event_id": uuid.UUID(event["id"]),
            "user_id": uuid.UUID(user["id"]),
            "registered_at": 1,
        }
        unique = ("event_id", "user_id")
        async with database.transaction() as tx:
            first = await tx.insert_new(Attendee, row, AttendeeRow, unique=unique)
            second = await tx.insert_new(Attendee, row, AttendeeRow, unique=unique)
            third = await tx.insert_new(Attendee, row, unique=unique)
            await tx.commit()
        assert type(first) is AttendeeRow and first._replace(**row) == first  # as given
        assert isinstance(first.id, uuid.UUID)  # its defaults filled in, as insert fills them
        assert second is None and third is False  # without a row type: whether it was written
        assert (await row_counts(database))["attendees"] == 1

    async def test_an_update_must_set_its_onupdate_columns_itself(self, database):
        users = table_of(User)
        statement = update(users).where(users.c.id == bindparam("id")).values(reputation=1)
        async with database.transaction() as tx:
            with pytest.raises(ValueError, match="updated_at"):
                await tx.execute(statement, id=uuid.uuid4())


@pytest.mark.skipif(BACKEND != "postgresql", reason="SQLite has one writer: no two wait at once")
async def test_one_waiter_lets_one_transaction_of_the_process_wait_for_a_row(database):
    """The second transaction waits for a hot row only once the first one has it; another row
    is not held up; and nothing is kept once nobody waits."""
    entered: list[str] = []
    first_inside, first_done = asyncio.Event(), asyncio.Event()

    async def wait_for(key: str, name: str, *, hold: bool = False) -> None:
        async with database.transaction() as tx:
            async with tx.one_waiter(key):
                entered.append(name)
                if hold:
                    first_inside.set()
                    await first_done.wait()

    first = asyncio.create_task(wait_for("product A", "first", hold=True))
    await first_inside.wait()
    second = asyncio.create_task(wait_for("product A", "second"))
    await wait_for("product B", "other")
    await asyncio.sleep(0.05)
    assert entered == ["first", "other"]
    first_done.set()
    await asyncio.gather(first, second)
    assert entered == ["first", "other", "second"]
    del first, second
    assert len(database._waiters) == 0


def _backend_pid(rows):
    return rows.scalar(select(func.pg_backend_pid()))


@pytest.mark.skipif(BACKEND != "postgresql", reason="PostgreSQL's pool")
@pytest.mark.direct_postgresql
class TestPooledConnections:
    """``Database._driver`` takes its connections from ``db.ConnectionPool``: a reader beyond
    the pool waits for a connection, overflow connections serve a burst and are closed on
    their way back, and connections the pool was told are stale (a server restart) are
    replaced."""

    @pytest.fixture
    async def small(self, database):
        def make(**sizes):
            made.append(Database(database.url.render_as_string(hide_password=False), **sizes))
            return made[-1]

        made: list[Database] = []
        yield make
        for one in made:
            await one.dispose()

    async def test_readers_beyond_the_pool_wait_for_its_connection(self, small):
        waits: list[float] = []
        db = small(pool_size=1, max_overflow=0)
        db.on_pool_wait = waits.append
        gate = asyncio.Event()

        async def hold(rows):
            await gate.wait()
            return await _backend_pid(rows)

        readers = [asyncio.create_task(db.read(hold)) for _ in range(4)]
        await asyncio.sleep(0.05)
        assert (db.pool.opened, db.pool.idle) == (1, 0)
        gate.set()
        pids = await asyncio.gather(*readers)
        assert len(set(pids)) == 1
        assert (db.pool.opened, db.pool.idle) == (1, 1)
        assert len(waits) == 4 and max(waits) >= 0.04  # the last ones waited for the first

    async def test_many_readers_some_cancelled_leave_the_pool_whole(self, small):
        """Readers queue, some are cancelled while they wait or while they read: every
        connection comes back, and none is opened beyond the limit."""
        db = small(pool_size=2, max_overflow=1)
        most = 0

        async def read(rows):
            nonlocal most
            most = max(most, db.pool.opened)
            await asyncio.sleep(0.001)
            return await _backend_pid(rows)

        tasks = [asyncio.create_task(db.read(read)) for _ in range(200)]
        await asyncio.sleep(0.01)
        for task in tasks[::7]:
            task.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        pids = {d for d in done if isinstance(d, int)}
        assert len(pids) <= 3 and most <= 3
        assert sum(isinstance(d, asyncio.CancelledError) for d in done) >= 1
        assert db.pool.opened == db.pool.idle <= 2  # the overflow one closed on its way back
        async with db.transaction() as tx:  # a kept connection serves the next write
            assert await _backend_pid(tx) in pids

    async def test_stale_connections_are_replaced(self, small):
        db = small(pool_size=1, max_overflow=0)
        first = await db.read(_backend_pid)
        assert await db.read(_backend_pid) == first  # the same idle connection, reused
        db.pool.expire()
        second = await db.read(_backend_pid)
        assert second != first
        assert await db.read(_backend_pid) == second

    async def test_overflow_connections_serve_a_burst(self, small):
        db = small(pool_size=1, max_overflow=1)
        gate = asyncio.Event()

        async def hold(rows):
            await gate.wait()
            return await _backend_pid(rows)

        readers = [asyncio.create_task(db.read(hold)) for _ in range(2)]
        await asyncio.sleep(0.05)
        assert (db.pool.opened, db.pool.idle) == (2, 0)
        gate.set()
        pids = await asyncio.gather(*readers)
        assert len(set(pids)) == 2
        assert (db.pool.opened, db.pool.idle) == (1, 1)
        async with db.transaction() as tx:  # and the connections work for writes too
            assert await _backend_pid(tx) in pids


class JobStatusRow(NamedTuple):
    id: uuid.UUID
    status: JobStatus


class StatusFirst(NamedTuple):
    status: JobStatus
    id: uuid.UUID


JOB_STATUS = select(JOBS.c.id, JOBS.c.status).where(JOBS.c.id == bindparam("id"))


class TestTypedRows:
    async def test_a_read_gives_the_named_tuple_it_was_asked_for(self, database, tenant):
        async with database.transaction() as tx:
            [written] = await tx.insert(Job, [job(tenant)], JobRow)
            await tx.commit()
        row = await database.read(lambda rows: rows.first(JOB_STATUS, JobStatusRow, id=written.id))
        assert type(row) is JobStatusRow
        assert row == (written.id, JobStatus.QUEUED)  # converted as SQLAlchemy converts

    async def test_a_row_type_that_does_not_fit_the_statement_is_refused(self, database, tenant):
        with pytest.raises(TypeError, match="StatusFirst has fields"):
            await database.read(lambda rows: rows.all(JOB_STATUS, StatusFirst, id=uuid.uuid4()))
