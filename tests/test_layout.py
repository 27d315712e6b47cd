"""The rules of the layout that no linter holds (docs/design.md, Layout): SQL statements are
built only in a ``repository.py`` (or a ``<part>_repository.py``), the ``db`` package and the
migrations; only the ``db`` package asks which backend it runs on; routes and console pages name
what they need in their signatures, never reading the app's state; one road to the database
(``Database``); services and repositories do not speak HTTP; views and parameters are typed; no
module imports, even lazily, one that imports it back; a table's row is declared once."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tessera"
BUILDERS = frozenset(
    {"select", "insert", "update", "delete", "text", "union", "union_all", "exists"}
    | {"literal_column", "case", "cast", "and_", "or_", "tuple_", "bindparam", "lateral"}
)
BACKEND_QUESTIONS = frozenset({"on_postgresql", "is_sqlite", "dialect_name"})


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "migrations" not in p.parts)


def _may_build_statements(path: Path) -> bool:
    relative = path.relative_to(SRC)
    # A repository split by what it holds: products' ``item_repository.py``.
    return path.name.endswith("repository.py") or relative.parts[0] in {"db", "models"}


def _sqlalchemy_modules(tree: ast.AST) -> set[str]:
    """The names SQLAlchemy's modules are bound to (``import sqlalchemy as sa``: ``sa``)."""
    return {
        alias.asname or alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.split(".")[0] == "sqlalchemy"
    }


def _statement_builders(tree: ast.AST) -> list[str]:
    """The calls of SQLAlchemy's statement builders (``select(...)``, ``func.count()``,
    ``sa.select(...)``, ``sqlalchemy.func.max(...)``)."""
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy")
        for alias in node.names
        if alias.name in BUILDERS | {"func"}
    }
    modules = _sqlalchemy_modules(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain, called = [], node.func
        while isinstance(called, ast.Attribute):
            chain.append(called.attr)
            called = called.value
        if not isinstance(called, ast.Name):
            continue
        through_module = called.id in modules and any(name in BUILDERS | {"func"} for name in chain)
        if called.id in imported or through_module:
            found.append((node.lineno, f"line {node.lineno}: {ast.unparse(node.func)}"))
    return [where for _, where in sorted(found, key=lambda found: found[0])]


@pytest.mark.parametrize(
    "path",
    [p for p in _modules() if not _may_build_statements(p)],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_statements_are_built_in_repositories_and_the_db_package(path: Path):
    assert _statement_builders(ast.parse(path.read_text())) == []


def test_the_check_finds_a_statement_where_there_is_one():
    tree = ast.parse("from sqlalchemy import func, select\nq = select(func.count())\n")
    assert _statement_builders(tree) == ["line 2: select", "line 2: func.count"]
    tree = ast.parse(
        "import sqlalchemy as sa\nimport sqlalchemy\n"
        "q = sa.select(sa.func.count())\nr = sqlalchemy.delete(t)\ns = sa.Integer()\n"
    )
    assert _statement_builders(tree) == [
        "line 3: sa.select",
        "line 3: sa.func.count",
        "line 4: sqlalchemy.delete",
    ]


@pytest.mark.parametrize(
    "path",
    [p for p in _modules() if p.relative_to(SRC).parts[0] not in {"db", "models"}],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_only_the_db_package_asks_which_backend_it_runs_on(path: Path):
    asked = [
        f"line {node.lineno}: {node.attr}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in BACKEND_QUESTIONS
    ]
    assert asked == []


ROUTE_DECORATORS = frozenset(
    {"get", "post", "put", "patch", "delete", "head", "options", "api_route", "websocket"}
)


def _defines_routes(tree: ast.AST) -> bool:
    """Whether a module adds routes: ``@router.get(...)`` and the like, or ``add_api_route``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                called = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(called, ast.Attribute) and called.attr in ROUTE_DECORATORS:
                    return True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "add_api_route":
                return True
    return False


def _takes_a_request(tree: ast.AST) -> bool:
    return any(
        isinstance(node, ast.arg)
        and isinstance(node.annotation, ast.Name)
        and node.annotation.id == "Request"
        for node in ast.walk(tree)
    )


def _serving_modules() -> list[Path]:
    """The modules that define routes, and the console's modules that handle its requests
    (``console/web.py``: the signed-in user, the pages' answers)."""
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        console = path.relative_to(SRC).parts[0] == "console"
        if _defines_routes(tree) or (console and _takes_a_request(tree)):
            found.append(path)
    return found


def _state_reads(tree: ast.AST) -> list[str]:
    """Where a module reaches into the app's state (``request.app.state``, ``app.state``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        app_state = node.attr == "state" and (
            (isinstance(owner, ast.Attribute) and owner.attr == "app")
            or (isinstance(owner, ast.Name) and owner.id == "app")
        )
        if app_state:
            found.append((node.lineno, f"line {node.lineno}: {ast.unparse(node)}"))
    return [where for _, where in sorted(found)]


@pytest.mark.parametrize("path", _serving_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_routes_and_pages_name_what_they_need_in_their_signatures(path: Path):
    """The principal, the database, the settings and the rest come as parameters, one
    ``Annotated`` alias each (``WriteAccess``, ``DatabaseDep``, ``SettingsDep``, ...)."""
    assert _state_reads(ast.parse(path.read_text())) == []


def test_the_serving_modules_are_found():
    found = {str(path.relative_to(SRC)) for path in _serving_modules()}
    assert {"users/router.py", "claims/pages.py", "console/web.py", "metrics/router.py"} <= found
    assert "console/service.py" not in found


def test_the_check_finds_a_state_read_where_there_is_one():
    tree = ast.parse(
        "async def page(request):\n"
        "    database = request.app.state.database\n"
        "    app.state.limiter = None\n"
    )
    assert _state_reads(tree) == [
        "line 2: request.app.state",
        "line 3: app.state",
    ]


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, names: set[str]) -> set[str]:
    """The modules of the package that ``path`` imports anywhere in it (lazily too; the
    package imports absolutely)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: a relative import"
            # the package or module named, and the module of each name taken from it
            targets = [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        for target in targets:
            while target and target not in names:  # a name in a module: the module
                target = target.rpartition(".")[0]
            if target:
                found.add(target)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                return [*stack[stack.index(imported) :], imported]
            if imported not in state and (found := visit(imported)):
                return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_no_module_imports_one_that_imports_it_back():
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    names = set(paths)
    # A package's __init__ is imported on the way to its modules; it is a module of its own.
    graph = {name: _imports(path, names) - {name} for name, path in paths.items()}
    assert _cycle(graph) is None


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def _loosely_typed(tree: ast.AST) -> list[str]:
    """Views made of ``SimpleNamespace`` and parameters typed ``X | Any`` (which says nothing
    of what they take): a view is a ``NamedTuple``, a parameter a type or a ``Protocol``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.Attribute) and "SimpleNamespace" in ast.unparse(node):
            found.append(f"line {node.lineno}: SimpleNamespace")
        elif isinstance(node, ast.arg) and node.annotation is not None:
            annotation = node.annotation
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                annotation = ast.parse(annotation.value, mode="eval").body
            if any(
                isinstance(part, ast.BinOp)
                and isinstance(part.op, ast.BitOr)
                and "Any" in {ast.unparse(part.left), ast.unparse(part.right)}
                for part in ast.walk(annotation)
            ):
                found.append(f"line {node.lineno}: {node.arg}: {ast.unparse(node.annotation)}")
    return sorted(set(found))


def test_views_and_parameters_are_typed():
    found = {
        str(path.relative_to(SRC)): loose
        for path in _modules()
        if (loose := _loosely_typed(ast.parse(path.read_text())))
    }
    assert found == {}


def test_the_typing_check_finds_a_namespace_and_an_or_any():
    tree = ast.parse(
        "from types import SimpleNamespace\n"
        "def f(a: 'int | Any', b: list[str | Any], c: int) -> SimpleNamespace: ...\n"
    )
    assert _loosely_typed(tree) == [
        "line 2: SimpleNamespace",
        "line 2: a: 'int | Any'",
        "line 2: b: list[str | Any]",
    ]


ROADS_AROUND = frozenset(
    {"create_engine", "create_async_engine", "Session", "sessionmaker", "async_sessionmaker"}
    | {"AsyncSession", "AsyncEngine", "SessionDep"}
)


def _orm_sessions(tree: ast.AST) -> list[str]:
    """What reaches the database around ``Database``: SQLAlchemy's engines and sessions
    (imported by name, or reached through ``sqlalchemy``, ``sa.orm``, ...), the ORM
    session's dependency, the app's state for the database."""
    modules = _sqlalchemy_modules(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "sqlalchemy.ext.asyncio":
            found.append((node.lineno, "sqlalchemy.ext.asyncio"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
            found += [(node.lineno, a.name) for a in node.names if a.name in ROADS_AROUND]
        elif isinstance(node, ast.Name) and node.id in {"AsyncSession", "SessionDep"}:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and ast.unparse(node).endswith("state.database"):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Attribute) and node.attr in ROADS_AROUND:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules:
                found.append((node.lineno, ast.unparse(node)))
    return [f"line {line}: {what}" for line, what in sorted(set(found))]


def test_one_road_to_the_database():
    """Every module reaches the database through ``Database`` (``read``, ``transaction``): the
    ORM session is the migrations' and the tests' alone, the app's state ``db``'s."""
    found = {
        str(path.relative_to(SRC)): roads
        for path in _modules()
        if path.relative_to(SRC).parts[0] != "db"
        if (roads := _orm_sessions(ast.parse(path.read_text())))
    }
    assert found == {}


def test_the_road_check_finds_a_session():
    tree = ast.parse(
        "from sqlalchemy.ext.asyncio import AsyncSession\n"
        "async def f(session: AsyncSession, request):\n"
        "    return request.app.state.database\n"
    )
    assert _orm_sessions(tree) == [
        "line 1: sqlalchemy.ext.asyncio",
        "line 2: AsyncSession",
        "line 3: request.app.state.database",
    ]


def test_the_road_check_finds_engines_and_orm_sessions_however_spelt():
    tree = ast.parse(
        "import sqlalchemy as sa\nimport sqlalchemy.orm\n"
        "from sqlalchemy import create_engine\nfrom sqlalchemy.orm import Session\n"
        "engine = sa.create_engine(url)\nwith sqlalchemy.orm.Session(engine) as s: ...\n"
    )
    assert _orm_sessions(tree) == [
        "line 3: create_engine",
        "line 4: Session",
        "line 5: sa.create_engine",
        "line 6: sqlalchemy.orm.Session",
    ]


# The modules of a domain package that speak HTTP: its routes, its pages and the FastAPI
# aliases its routes take. The console is a web interface of its own, all of it HTTP.
HTTP_MODULES = frozenset({"router.py", "pages.py", "dependencies.py"})


def _use_case_modules() -> list[Path]:
    """Every module of a domain package (one with a ``service.py``) but its HTTP modules."""
    domains = {p.parent for p in SRC.glob("*/service.py")} - {SRC / "console"}
    return [p for p in _modules() if p.parent in domains and p.name not in HTTP_MODULES]


def test_use_cases_do_not_speak_http():
    """A use-case returns a domain result or raises a domain error (tessera.errors); what
    status and headers answer it is its router's to say. Every module of a domain package
    but its router, pages and dependencies: services, repositories, rules, workers, schemas."""
    speaking = {
        str(path.relative_to(SRC)): sorted(_imports(path, {"fastapi", "starlette"}))
        for path in _use_case_modules()
        if _imports(path, {"fastapi", "starlette"})
    }
    assert speaking == {}


def test_the_use_case_modules_are_found():
    found = {str(path.relative_to(SRC)) for path in _use_case_modules()}
    assert {"products/rules.py", "nfts/mints.py", "jobs/worker.py", "claims/limiter.py"} <= found
    assert not {"products/router.py", "claims/pages.py", "console/web.py"} & found


def _package(module: str) -> str:
    """The package a module is of: ``tessera.users.router`` is of ``users``; a module at the
    top (``tessera.web.pages``) is a package of its own."""
    return module.split(".")[1] if "." in module else module


def _mutual(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph.get(b, set()))


def test_no_two_packages_import_each_other():
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    names = set(paths)
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        mine = _package(name)
        theirs = {_package(imported) for imported in _imports(path, names)}
        graph.setdefault(mine, set()).update(theirs - {mine})
    assert _mutual(graph) == []


def test_the_package_check_finds_two_packages_that_import_each_other():
    assert _package("tessera.users.router") == "users" and _package("tessera") == "tessera"
    assert _mutual({"users": {"wallets", "db"}, "wallets": {"users"}, "db": set()}) == [
        ("users", "wallets")
    ]


# Packages with tables that take and answer no JSON, so have no schemas (and no schemas.py).
NO_SCHEMAS = {"metrics": "GET /metrics answers Prometheus' text format"}


def _shape_gaps() -> dict[str, set[str]]:
    """What each package with a ``repository.py`` lacks of ``service.py`` and ``schemas.py``,
    and of ``router.py`` where one of its modules defines routes."""
    gaps = {}
    serving = {path.parent for path in _serving_modules()}
    for repository in sorted(SRC.glob("*/repository.py")):
        package = repository.parent
        wanted = {"service.py", "repository.py"}
        if package.name not in NO_SCHEMAS:
            wanted.add("schemas.py")
        if package in serving:
            wanted.add("router.py")
        missing = {name for name in wanted if not (package / name).exists()}
        if missing:
            gaps[package.name] = missing
    return gaps


def test_domains_have_the_same_files():
    """Every package with tables has ``router.py`` (where it has routes), ``service.py``,
    ``repository.py`` and ``schemas.py``."""
    assert _shape_gaps() == {}


# Public use-cases of a service.py that open a transaction and are not run again on a conflict
# (``db.conflicts``), and why: each is either not a request's, or not safe to run again whole.
RUN_ONCE = {
    "auth/service.py": {"flush": "the usage writer's batch: the next flush writes it again"},
    "reconciliation/service.py": {
        "reconcile": "reads the chain and records what it found: a job's, run again by the worker"
    },
    "ticket_keys/service.py": {
        "key_every_project": "tessera db upgrade's, one transaction per project, run again whole"
    },
    "extrinsics/service.py": {
        "sign": "signs and records an extrinsic for the chain: its caller decides what is next",
        "submit_all": "submits to the chain: not done twice, and followed by the worker anyway",
    },
    "metrics/service.py": {
        "record_wallet_balances": "a chore of the worker: its next round reads the balances again"
    },
}


def _transactions_not_rerun() -> dict[str, list[str]]:
    """The public functions (and methods) of each ``service.py`` that enter
    ``database.transaction()`` without ``@rerun_on_conflict``, less those in ``RUN_ONCE``."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("service.py")):
        relative = str(path.relative_to(SRC))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            opens = any(
                isinstance(inner, ast.AsyncWith)
                and ast.unparse(inner.items[0].context_expr).endswith("database.transaction()")
                for inner in ast.walk(node)
            )
            rerun = any(ast.unparse(d) == "rerun_on_conflict" for d in node.decorator_list)
            if opens and not rerun and node.name not in RUN_ONCE.get(relative, {}):
                found.setdefault(relative, []).append(node.name)
    return found


def test_use_cases_run_again_on_a_conflict():
    """A use-case's transaction that PostgreSQL aborts as a deadlock runs again (docs/design.md,
    Locks): every public use-case of a service that opens a transaction says so with
    ``@rerun_on_conflict``, or is named in ``RUN_ONCE`` with the reason it is not."""
    assert _transactions_not_rerun() == {}


def _named_tuples() -> dict[str, set[str]]:
    """Every ``NamedTuple`` of the package: ``module:Class`` and its fields."""
    found = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(base) in {"NamedTuple", "typing.NamedTuple"} for base in node.bases
            ):
                fields = {
                    statement.target.id
                    for statement in node.body
                    if isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                }
                found[f"{path.relative_to(SRC)}:{node.name}"] = fields
    return found


def _rows_declared(
    tables: dict[str, set[str]], tuples: dict[str, set[str]]
) -> dict[str, list[str]]:
    """For each table of ten columns or more, the named tuples that write out four fifths of
    them or more: a table's full row is declared once, and what else reads it is a projection
    of a few columns or a join of whole rows (``db.Joined``)."""
    return {
        table: sorted(
            name for name, fields in tuples.items() if len(fields & columns) * 5 >= len(columns) * 4
        )
        for table, columns in tables.items()
        if len(columns) >= 10
    }


# Tables whose columns are still written out again in a narrower row: to fold as
# ``product_items``' were (issue 44 folded the widest, 25 columns in six rows, first).
WRITTEN_AGAIN = {
    "products": {
        "products/rows.py:ProductRow",
        "products/rows.py:ProductReadRow",
        "products/rows.py:ProductEventRow",
        "products/rows.py:ProductView",
    },
    "users": {"users/repository.py:UserRow", "users/repository.py:CreatedUser"},
    "claim_links": {"claims/repository.py:LinkRow", "claims/repository.py:OfferRow"},
    "project_wallets": {
        "projects/repository.py:ProjectWalletRow",
        "users/repository.py:WalletRow",
    },
}


def test_each_table_s_row_is_declared_once():
    from tessera.models import Base

    tables = {name: set(table.columns.keys()) for name, table in Base.metadata.tables.items()}
    declared = _rows_declared(tables, _named_tuples())
    assert declared["product_items"] == ["products/rows.py:ItemRow"]
    twice = {table: set(names) for table, names in declared.items() if len(names) > 1}
    assert twice == WRITTEN_AGAIN  # none more, and one folded leaves this list


def test_the_row_check_finds_a_row_written_twice():
    columns = {"id", *"abcdefghi"}
    tuples = {
        "x.py:Thing": set(columns),
        "y.py:ThingAndMore": {*"abcdefgh", "more"},
        "z.py:ThingNamed": {"id", "a"},
    }
    rows = _rows_declared({"things": columns, "small": {"id", "a"}}, tuples)
    assert rows == {"things": ["x.py:Thing", "y.py:ThingAndMore"]}


def test_the_top_level_is_a_map():
    """At most six modules at the top besides the entry points; the rest in packages."""
    top = sorted(p.name for p in SRC.glob("*.py") if p.name not in {"__init__.py", "__main__.py"})
    assert len(top) <= 6, top


def test_no_source_file_is_over_500_lines():
    long = {
        str(path.relative_to(SRC)): lines
        for path in _modules()
        if (lines := len(path.read_text().splitlines())) > 500
    }
    assert long == {}
