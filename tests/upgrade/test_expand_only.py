"""The migrations after the previous release's head only expand the schema (the rule is in
``tessera/migrations/__init__.py``), as far as a look at their ``upgrade()`` can tell: no table
or column dropped or renamed, no column made NOT NULL or added NOT NULL without a server
default, no server default removed, no index built on an existing table under a lock that blocks
its writes on PostgreSQL. Anything else of the rule (a backfill in batches) is the reviewer's.
"""

import ast
from pathlib import Path

from alembic.script import ScriptDirectory

from tessera import migrations
from tests.upgrade.releases import PREVIOUS, RELEASES

# Contractions let through after review: revision -> the release since which nothing in service
# reads or writes what it removes. Keep the entry: it says why the rule held.
REVIEWED_CONTRACTIONS: dict[str, str] = {}


def contractions(source: str) -> list[str]:
    """What a migration's ``upgrade()`` does that a process of the previous release, still
    serving on the upgraded schema, cannot live with: one line each."""
    tree = ast.parse(source)
    [upgrade] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "upgrade"]
    batches = _batch_tables(upgrade)
    calls = [(call, name, batches.get(_receiver(call) or "")) for call, name in _calls(upgrade)]
    created = {
        _text(_argument(c, 0, "table_name")) for c, name, _ in calls if name == "create_table"
    }
    return [
        f"line {call.lineno}: {why}"
        for call, name, batch_table in calls
        for why in _contraction(call, name, batch_table, created)
    ]


def _contraction(
    call: ast.Call, name: str, batch_table: str | None, created: set[str | None]
) -> list[str]:
    """Why the call contracts the schema, if it does; ``batch_table``: the table of the batch
    operation it is made on (``with op.batch_alter_table(...) as batch_op``)."""
    keywords = {k.arg: k.value for k in call.keywords}
    table = batch_table or _text(_argument(call, 0, "table_name"))
    if name in {"drop_table", "drop_column", "rename_table"}:
        return [f"{name} on {table}: contract in a later release"]
    if name == "alter_column":
        why = []
        if "new_column_name" in keywords:
            why.append(f"renames a column of {table}")
        if _is(keywords.get("nullable"), False):
            why.append(f"makes a column of {table} NOT NULL")
        if "server_default" in keywords and _is(keywords["server_default"], None):
            why.append(f"removes a server default of {table}")
        return [f"alter_column {reason}: contract in a later release" for reason in why]
    if name == "add_column":
        return [
            f"add_column: {table}.{_text(column.args[0]) if column.args else '?'} is NOT NULL "
            "without a server_default (the previous release inserts rows without it)"
            for column in call.args
            if isinstance(column, ast.Call) and _is_column(column)
            if _not_null_without_default(column)
        ]
    if name == "create_index":
        indexed = batch_table or _text(_argument(call, 1, "table_name"))
        if indexed in created or _is(keywords.get("postgresql_concurrently"), True):
            return []
        return [
            f"create_index on {indexed}, an existing table, blocks its writes on PostgreSQL: "
            "postgresql_concurrently=True in `with op.get_context().autocommit_block():`"
        ]
    return []


def _calls(function: ast.FunctionDef) -> list[tuple[ast.Call, str]]:
    """The method calls in ``function`` (``op``'s and batch operations'), in source order, with
    the method's name."""
    calls = [
        (node, node.func.attr)
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]
    return sorted(calls, key=lambda call: (call[0].lineno, call[0].col_offset))


def _batch_tables(function: ast.FunctionDef) -> dict[str, str]:
    """``with op.batch_alter_table("t") as batch_op``: the table each such name alters."""
    tables = {}
    for node in ast.walk(function):
        for item in node.items if isinstance(node, ast.With) else []:
            call, name = item.context_expr, item.optional_vars
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "batch_alter_table"
                and isinstance(name, ast.Name)
                and (table := _text(_argument(call, 0, "table_name")))
            ):
                tables[name.id] = table
    return tables


def _receiver(call: ast.Call) -> str | None:
    function = call.func
    if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
        return function.value.id
    return None


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == keyword:
            return k.value
    return call.args[position] if len(call.args) > position else None


def _text(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is(node: ast.expr | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _is_column(node: ast.Call) -> bool:
    function = node.func
    return (isinstance(function, ast.Attribute) and function.attr == "Column") or (
        isinstance(function, ast.Name) and function.id == "Column"
    )


def _not_null_without_default(column: ast.Call) -> bool:
    keywords = {k.arg: k.value for k in column.keywords}
    not_null = _is(keywords.get("nullable"), False) or _is(keywords.get("primary_key"), True)
    default = "server_default" in keywords and not _is(keywords["server_default"], None)
    return not_null and not default


def since(head: str) -> list[Path]:
    """The files of the migrations after ``head``, oldest first."""
    scripts = ScriptDirectory(str(migrations.HERE))
    return [
        Path(script.path) for script in reversed(list(scripts.iterate_revisions("heads", head)))
    ]


class TestMigrationsAfterThePreviousRelease:
    def test_only_expand(self):
        found = {
            f"{path.name}: {line}"
            for path in since(PREVIOUS.head)
            if path.stem not in REVIEWED_CONTRACTIONS
            for line in contractions(path.read_text(encoding="utf-8"))
        }
        assert sorted(found) == []

    def test_the_pins_are_revisions_of_this_code_in_release_order(self):
        scripts = ScriptDirectory(str(migrations.HERE))
        history = [script.revision for script in reversed(list(scripts.walk_revisions()))]
        heads = [release.head for release in RELEASES]
        assert set(heads) <= set(history)
        assert heads == sorted(set(heads), key=history.index)


BAD = """
import sqlalchemy as sa
from alembic import op


def upgrade() -> None:
    op.create_table("tags", sa.Column("id", sa.Uuid(), nullable=False))
    op.create_index("ix_tags_id", "tags", ["id"])
    op.add_column("users", sa.Column("nickname", sa.String(), nullable=True))
    op.add_column("users", sa.Column("score", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("users", sa.Column("rank", sa.Integer(), nullable=False))
    op.drop_column("users", "legacy")
    op.drop_table("old_things")
    op.rename_table("orders", "purchases")
    op.create_index("ix_users_email", "users", ["email"])
    with op.get_context().autocommit_block():
        op.create_index("ix_items_owner", "items", ["owner_id"], postgresql_concurrently=True)
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.alter_column("subject", server_default=None)
        batch_op.alter_column("kind", new_column_name="type")
        batch_op.alter_column("note", nullable=False)
        batch_op.add_column(sa.Column("lane", sa.String(), nullable=False))
        batch_op.drop_column("weight")


def downgrade() -> None:
    op.drop_table("tags")
"""


class TestTheCheck:
    def test_finds_every_contraction_and_nothing_else(self):
        assert contractions(BAD) == [
            "line 11: add_column: users.rank is NOT NULL without a server_default (the previous "
            "release inserts rows without it)",
            "line 12: drop_column on users: contract in a later release",
            "line 13: drop_table on old_things: contract in a later release",
            "line 14: rename_table on orders: contract in a later release",
            "line 15: create_index on users, an existing table, blocks its writes on PostgreSQL: "
            "postgresql_concurrently=True in `with op.get_context().autocommit_block():`",
            "line 19: alter_column removes a server default of jobs: contract in a later release",
            "line 20: alter_column renames a column of jobs: contract in a later release",
            "line 21: alter_column makes a column of jobs NOT NULL: contract in a later release",
            "line 22: add_column: jobs.lane is NOT NULL without a server_default (the previous "
            "release inserts rows without it)",
            "line 23: drop_column on jobs: contract in a later release",
        ]

    def test_the_contractions_before_the_previous_release_are_found(self):
        """0004 removed the default 0002 gave ``jobs.subject``: a contraction, made when no
        release was in service."""
        [removed] = [
            p for p in migrations.HERE.glob("versions/*.py") if "subject_without" in p.name
        ]
        assert contractions(removed.read_text(encoding="utf-8")) == [
            "line 24: alter_column removes a server default of jobs: contract in a later release"
        ]
