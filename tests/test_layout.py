"""The rules of the layout that no linter holds (docs/design.md, Layout): SQL statements are
built only in a ``repository.py``, the ``db`` package and the migrations; only the ``db`` package
asks which backend it runs on; no module imports, even lazily, one that imports it back."""

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
    return path.name == "repository.py" or relative.parts[0] in {"db", "models"}


def _statement_builders(tree: ast.AST) -> list[str]:
    """The calls of SQLAlchemy's statement builders (``select(...)``, ``func.count()``)."""
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy")
        for alias in node.names
        if alias.name in BUILDERS | {"func"}
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        while isinstance(called, ast.Attribute):
            called = called.value
        if isinstance(called, ast.Name) and called.id in imported:
            found.append(f"line {node.lineno}: {ast.unparse(node.func)}")
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_statements_are_built_in_repositories_and_the_db_package(path: Path):
    if _may_build_statements(path):
        return
    assert _statement_builders(ast.parse(path.read_text())) == []


def test_the_check_finds_a_statement_where_there_is_one():
    tree = ast.parse("from sqlalchemy import func, select\nq = select(func.count())\n")
    assert _statement_builders(tree) == ["line 2: select", "line 2: func.count"]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_only_the_db_package_asks_which_backend_it_runs_on(path: Path):
    if path.relative_to(SRC).parts[0] in {"db", "models"}:
        return
    asked = [
        f"line {node.lineno}: {node.attr}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in BACKEND_QUESTIONS
    ]
    assert asked == []


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
