"""The compiler proven on every statement: each SQLAlchemy statement a module of Tessera
defines is run once on the suite's backend (SQLite, and PostgreSQL in its run), through
``Database.transaction``, with a value of its type for each of its parameters, and rolled
back. A new statement is covered by being written: the census finds it.

The census reads every module of the package from its files (``reconciliation`` has no
``__init__.py``, so ``pkgutil.walk_packages`` would not see it), but the migrations, which run
against the schema of their day (tests/test_migrations.py). A statement is a module constant:
a name the module assigns at its top level to a SELECT, INSERT, UPDATE, DELETE, compound
SELECT or text, or to a dict, list or tuple of them (one statement per variant:
``_USERS["id"]``). A name the module imports is another module's statement, counted there; a
function call (``func.least(...)``, a fragment) is no statement. Statements built by functions
at each call (``Transaction.insert``'s) are not module constants and not in the census.

Nothing is committed and no rows are needed: a statement that matches no row still compiles on
the backend, binds its parameters with the types they are declared with, and is prepared and
run by the database.
"""

import ast
import importlib
import uuid
from collections import namedtuple
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    ARRAY,
    JSON,
    BindParameter,
    ClauseElement,
    Dialect,
    Enum,
    Executable,
    Integer,
    Tuple,
)
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BinaryExpression
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.selectable import GenerativeSelect
from sqlalchemy.types import NullType, TypeEngine

import tessera
from tessera.db import Database
from tessera.db.compiled import sizes_of
from tessera.models import Project
from tests.conftest import BACKEND, database_at

PACKAGE = Path(tessera.__file__).resolve().parent

# Statements written for PostgreSQL alone, run by their module only where ``on_postgresql``
# (or only with ``database.is_sqlite`` false); SQLite has no such functions or casts.
POSTGRESQL_ONLY = {
    "tessera.db.buckets:_TAKE": "a rate bucket is a row on PostgreSQL only (least())",
    "tessera.db.buckets:_LEFT": "a rate bucket is a row on PostgreSQL only (least())",
    "tessera.db.feed:_AFTER_FINAL_SEEN": "pg_visible_in_snapshot() of the feed's snapshot",
    "tessera.db.feed:_END_PG": "pg_current_snapshot() and the transaction horizon",
    "tessera.db.issuing:_BUMP_AND_INSERT[False]": "one statement of CTEs with unnest(UUID[])",
    "tessera.db.issuing:_BUMP_AND_INSERT[True]": "one statement of CTEs with unnest(UUID[])",
    "tessera.db.sql:_XACT_LOCK": "pg_advisory_xact_lock(); SQLite's writer holds the database",
    "tessera.db.sql:_XACT_LOCKS": "pg_advisory_xact_lock() of many; SQLite's writer holds it all",
    "tessera.db.windows:_ADMIT": "admit_rate_hits(), a PL/pgSQL function (migration 0025)",
}


# The compiled layer's statements built at run time for any table (``insert_all``,
# ``Transaction.insert_new``, ``add_to``): what they hold depends on what ran before.
CACHES = {"tessera.db.compiled:_INSERTS", "tessera.db.rows:_INSERT_NEW", "tessera.db.rows:_ADD_TO"}


# Parameters that take a value of a form, not only of a type: (statement, parameter): value.
VALUES = {
    # a pg_snapshot's text, as ``feed.end`` gives it ("xmin:xmax:xip,...")
    ("tessera.db.feed:_AFTER_FINAL_SEEN", "snapshot"): "1:1:",
}


@dataclass(frozen=True)
class Statement:
    id: str  # "module:NAME", "module:NAME[key]" for a variant
    statement: Executable


def _module_names() -> Iterator[str]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[1] == "migrations":
            continue
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _assigned(tree: ast.Module) -> Iterator[str]:
    """The names a module assigns at its top level (under an ``if`` or ``try`` too), not
    those it imports or defines in a function or class."""
    nodes = list(tree.body)
    while nodes:
        node = nodes.pop(0)
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try | ast.ExceptHandler):
            blocks = ("body", "orelse", "handlers", "finalbody")
            nodes[:0] = [child for block in blocks for child in getattr(node, block, ())]


def _label(key: Any) -> str:
    """A variant's key as its id shows it (a model by its name)."""
    return key.__name__ if isinstance(key, type) else repr(key)


def _is_statement(value: Any) -> bool:
    return (
        isinstance(value, Executable)
        and isinstance(value, ClauseElement)
        and not isinstance(value, FunctionElement)  # a fragment: executable only as SELECT f()
    )


def census() -> list[Statement]:
    found: list[Statement] = []
    seen: set[int] = set()
    for name in _module_names():
        module = importlib.import_module(name)
        assert module.__file__ is not None
        tree = ast.parse(Path(module.__file__).read_text())
        for attribute in dict.fromkeys(_assigned(tree)):
            value = getattr(module, attribute, None)
            if f"{name}:{attribute}" in CACHES:
                continue
            if isinstance(value, dict):
                variants = [(f"[{_label(key)}]", v) for key, v in value.items()]
            elif isinstance(value, list | tuple):
                variants = [(f"[{i}]", v) for i, v in enumerate(value)]
            else:
                variants = [("", value)]
            for suffix, statement in variants:
                if _is_statement(statement) and id(statement) not in seen:
                    seen.add(id(statement))
                    found.append(Statement(f"{name}:{attribute}{suffix}", statement))
    return found


CENSUS = census()


def _sample(kind: TypeEngine[Any]) -> Any:
    """A value of ``kind`` as the application gives one."""
    if isinstance(kind, ARRAY):
        return (_sample(kind.item_type),)  # an array is a tuple: a list is expanded (``sizes_of``)
    if isinstance(kind, JSON):
        return {}
    if isinstance(kind, Enum):
        return next(iter(kind.enum_class)) if kind.enum_class else kind.enums[0]
    kind = getattr(kind, "impl_instance", kind)  # a TypeDecorator's (``UTCDateTime``)
    python_type = kind.python_type
    if python_type is datetime:
        return datetime.now(UTC) if getattr(kind, "timezone", False) else datetime.now()
    samples: dict[type[Any], Any] = {
        uuid.UUID: uuid.uuid4(),
        bool: True,
        int: 1,
        float: 1.0,
        Decimal: Decimal("1"),
        str: "x",
        bytes: b"x",
        dict: {},
        list: [],
        date: date.today(),
        timedelta: timedelta(seconds=1),
    }
    return samples[python_type]


def _typed(statement: Any, bind: BindParameter[Any]) -> TypeEngine[Any] | None:
    """A parameter's type: its own, that of what it is compared with (a tuple's element by
    element), or Integer for a LIMIT or OFFSET (which SQLAlchemy leaves untyped); None when it
    has none."""
    if not isinstance(bind.type, NullType):
        return bind.type
    for element in visitors.iterate(statement):
        if isinstance(element, BinaryExpression):
            pairs = [(element.left, element.right)]
            if isinstance(element.left, Tuple) and isinstance(element.right, Tuple):
                pairs = list(zip(element.left.clauses, element.right.clauses, strict=True))
            for left, right in pairs:
                for side, other in ((left, right), (right, left)):
                    if (
                        isinstance(side, BindParameter)
                        and side.key == bind.key
                        and not isinstance(other.type, NullType)
                    ):
                        return other.type
        if isinstance(element, GenerativeSelect):
            # private, but the only way to the clauses themselves
            for clause in (element._limit_clause, element._offset_clause):
                if isinstance(clause, BindParameter) and clause.key == bind.key:
                    return Integer()
    return None


def parameters(item: Statement, dialect: Dialect) -> dict[str, Any]:
    """A value of the right type for each parameter the caller gives; two for a list. The
    types are those of the statement compiled (a value set on a column takes its type)."""
    statement: Any = item.statement
    binds = statement.compile(dialect=dialect).binds
    required = {
        element.key
        for element in visitors.iterate(statement)
        if isinstance(element, BindParameter) and element.required
    }
    params = {}
    for key in sorted(required):
        bind = binds[key]
        kind = _typed(statement, bind)
        if kind is None:
            pytest.fail(
                f"{item.id}: the parameter {key!r} has no type (give it one: "
                f"bindparam({key!r}, type_=...), or .bindparams(...) for text)"
            )
        if (item.id, key) in VALUES:
            params[key] = VALUES[item.id, key]
        elif bind.expanding:
            params[key] = [_sample(kind), _sample(kind)]
        else:
            params[key] = _sample(kind)
    return params


@pytest.fixture(scope="module")
async def database(database_url: str) -> AsyncIterator[Database]:
    """A database of the census's own: nothing is committed, so no clean slate is needed."""
    database = database_at(database_url, pool_size=2, max_overflow=0)
    yield database
    await database.dispose()


def _runs_here(item: Statement) -> bool:
    return item.id not in POSTGRESQL_ONLY or BACKEND == "postgresql"


@pytest.mark.parametrize("item", CENSUS, ids=lambda item: item.id)
async def test_the_statement_runs(database, item):
    if not _runs_here(item):
        pytest.skip(POSTGRESQL_ONLY[item.id])
    params = parameters(item, database.dialect)
    async with database.transaction() as tx:  # rolled back: never committed
        # The one row a statement may need: a project, whose id each ``project_id`` takes
        # (a row inserted for a project refers to it).
        project_id = uuid.uuid4()
        await tx.insert(Project, [{"id": project_id, "name": "census"}])
        if "project_id" in params:
            params["project_id"] = project_id
        compiled = database.compiled(item.statement, sizes_of(params))
        if compiled.keys:
            row = namedtuple("Row", compiled.keys)  # type: ignore[misc]
            await tx.all(item.statement, row, **params)
        else:
            await tx.execute(item.statement, **params)


def _has_literal_list(statement: Executable) -> bool:
    return any(
        isinstance(element, BindParameter) and element.expanding and not element.required
        for element in visitors.iterate(statement)
    )


class TestTheCensus:
    def test_every_repository_is_in_it(self):
        repositories = {
            ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
            for path in PACKAGE.glob("*/repository.py")
        }
        counted = {item.id.partition(":")[0] for item in CENSUS}
        assert repositories - counted == set()
        assert "tessera.reconciliation.repository:_FORGET" in {item.id for item in CENSUS}
        assert len(CENSUS) >= 200

    def test_a_literal_list_is_in_it(self):
        """The mail purge's statuses, a list of the statement's own (``in_([...])``)."""
        listed = {item.id for item in CENSUS if _has_literal_list(item.statement)}
        assert "tessera.mail.repository:_PURGE" in listed

    def test_the_statements_for_one_backend_and_the_values_of_a_form_are_in_it(self):
        ids = {item.id for item in CENSUS}
        assert set(POSTGRESQL_ONLY) <= ids
        assert {statement for statement, _ in VALUES} <= ids

    def test_a_statement_is_counted_where_it_is_assigned_not_where_it_is_imported(self):
        source = "from a import B\nif x:\n    C: T = select()\nD, E = F = 1, 2\n"
        source += "def g():\n    H = 3\nclass I:\n    J = 4\n"
        assert list(_assigned(ast.parse(source))) == ["C", "D", "E", "F"]
