"""Rows named by their ids are found through the primary key, not by reading every row of the
project (tessera.db.NotIndexed): SQLite, which has no statistics until ANALYZE, otherwise took
the project's index for ``project_id = ? AND id IN (...)`` and read a million users to find 550.

The plans are SQLite's for Tessera's schema, whatever the suite's backend: they do not depend
on the rows in it."""

import sqlite3
import uuid

import pytest
from sqlalchemy import create_engine
from sqlalchemy.dialects import postgresql, sqlite

from tessera.db.compiled import Compiled, sizes_of
from tessera.models import Base
from tessera.products.repository import _EVENTS_IN, _PRODUCTS_IN
from tessera.users.repository import _USERS_IN
from tessera.users.reputation_repository import _REPUTATIONS

IDS = [uuid.uuid4() for _ in range(3)]
BY_ID = [
    ("users", _USERS_IN["id"], {"project_id": uuid.uuid4(), "values": IDS}),
    ("users", _REPUTATIONS, {"project_id": uuid.uuid4(), "ids": IDS}),
    ("products", _PRODUCTS_IN, {"project_id": uuid.uuid4(), "ids": IDS}),
    ("events", _EVENTS_IN, {"project_id": uuid.uuid4(), "ids": IDS}),
]


@pytest.fixture(scope="module")
def schema(tmp_path_factory) -> sqlite3.Connection:
    path = tmp_path_factory.mktemp("plans") / "schema.db"
    engine = create_engine(f"sqlite:///{path}")
    Base.metadata.create_all(engine)
    engine.dispose()
    connection = sqlite3.connect(path)
    yield connection
    connection.close()


def _plan(connection: sqlite3.Connection, statement, params) -> list[str]:
    compiled = Compiled.of(statement, sizes_of(params), sqlite.dialect())
    explained = connection.execute(f"EXPLAIN QUERY PLAN {compiled.sql}", compiled.arguments(params))
    return [row[3] for row in explained]


@pytest.mark.parametrize(("table", "statement", "params"), BY_ID)
def test_rows_by_id_come_through_the_primary_key(schema, table, statement, params):
    plan = _plan(schema, statement, params)
    assert len(plan) == 1, plan
    assert plan[0].startswith(f"SEARCH {table} USING") and "(id=?)" in plan[0], plan


def test_without_it_sqlite_reads_the_whole_project(schema):
    """What the condition guards against: the same statement with the project's column plain."""
    params = {"project_id": uuid.uuid4(), "values": IDS}
    compiled = Compiled.of(_USERS_IN["id"], sizes_of(params), sqlite.dialect())
    plain = compiled.sql.replace("+users.project_id", "users.project_id")
    assert plain != compiled.sql
    arguments = compiled.arguments(params)
    [plan] = [row[3] for row in schema.execute(f"EXPLAIN QUERY PLAN {plain}", arguments)]
    assert "(project_id=?)" in plan and "(id=?)" not in plan, plan


@pytest.mark.parametrize(("table", "statement", "params"), BY_ID)
def test_postgresql_gets_the_plain_condition(table, statement, params):
    sql = Compiled.of(statement, sizes_of(params), postgresql.dialect()).sql
    assert f"WHERE {table}.project_id = " in sql and "+" not in sql
