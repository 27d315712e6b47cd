"""Core statements compiled once per backend, their arguments and their rows."""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BindParameter, Dialect, Table, bindparam, insert
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.sql import visitors

MAX_COMPILED = 1000  # statements x lengths of their list parameters


_INSERTS: dict[Table, Any] = {}
Processor = Callable[[Any], Any] | None


def insert_all(table: Table) -> Any:
    """``INSERT INTO table (every column) VALUES (...)``, built once per table."""
    statement = _INSERTS.get(table)
    if statement is None:
        statement = _INSERTS[table] = insert(table).values(column_values(table))
    return statement


@dataclass(frozen=True, slots=True)
class Bulk:
    """PostgreSQL: a statement on many rows of a table at once, each column sent as one array
    (``unnest($1::type[], ...)``): a row costs the server a tuple, not a statement, where
    ``executemany`` runs the statement once per row. Each value converted as the column's type
    converts it (``insert_all``'s conversions)."""

    sql: str
    columns: tuple[tuple[str, Processor], ...]

    def arguments(self, rows: Sequence[dict[str, Any]]) -> list[list[Any]]:
        return [
            [
                row[name] if process is None or row[name] is None else process(row[name])
                for row in rows
            ]
            for name, process in self.columns
        ]


_BULK: dict[tuple[Table, str, tuple[str, ...], str], Bulk] = {}


def _arrays(table: Table, names: Sequence[str], dialect: Dialect) -> str:
    return ", ".join(
        f"${i}::{table.c[name].type.compile(dialect=dialect)}[]"
        for i, name in enumerate(names, start=1)
    )


def _processors(
    table: Table, names: Sequence[str], dialect: Dialect
) -> tuple[tuple[str, Processor], ...]:
    return tuple(
        (name, table.c[name].type.dialect_impl(dialect).bind_processor(dialect)) for name in names
    )


def bulk_insert(table: Table, dialect: Dialect, *, unique: tuple[str, ...] = ()) -> Bulk:
    """``INSERT INTO table (insert_all's columns) SELECT * FROM unnest(...)``, the rows in the
    order given; with ``unique``, ``ON CONFLICT (unique) DO NOTHING RETURNING`` the primary
    key of each row written. Built once per table (PostgreSQL's dialect)."""
    key = (table, "insert", unique, dialect.name)
    found = _BULK.get(key)
    if found is None:
        names = list(column_values(table))
        quote = dialect.identifier_preparer.quote
        into = ", ".join(quote(table.c[name].name) for name in names)
        # The names are the model's, the types its columns': no input reaches the statement.
        sql = f"INSERT INTO {quote(table.name)} ({into}) SELECT * FROM unnest({_arrays(table, names, dialect)})"  # noqa: S608, E501
        if unique:
            [primary] = table.primary_key.columns
            conflict = ", ".join(quote(table.c[name].name) for name in unique)
            sql += f" ON CONFLICT ({conflict}) DO NOTHING RETURNING {quote(primary.name)}"
        found = _BULK[key] = Bulk(sql, _processors(table, names, dialect))
    return found


def bulk_update(table: Table, dialect: Dialect, names: tuple[str, ...]) -> Bulk:
    """``UPDATE table SET (names) FROM unnest(...)`` of rows named by their ``id`` (the first
    column sent): rows the caller holds locked already, for the statement locks in no order of
    its own. Built once per table and columns (PostgreSQL's dialect)."""
    key = (table, "update", names, dialect.name)
    found = _BULK.get(key)
    if found is None:
        quote = dialect.identifier_preparer.quote
        columns = ("id", *names)
        given = ", ".join(quote(f"v_{name}") for name in columns)
        sets = ", ".join(f"{quote(table.c[n].name)} = v.{quote(f'v_{n}')}" for n in names)
        sql = (
            f"UPDATE {quote(table.name)} SET {sets} "  # noqa: S608 - the model's names
            f"FROM unnest({_arrays(table, columns, dialect)}) AS v({given}) "
            f"WHERE {quote(table.name)}.{quote(table.c.id.name)} = v.{quote('v_id')}"
        )
        found = _BULK[key] = Bulk(sql, _processors(table, columns, dialect))
    return found


def column_values(table: Table) -> dict[str, BindParameter[Any]]:
    """A parameter for every column, named by the column, but those the database fills in: a
    counted key, and a server default with no Python one (``changes.seq`` and ``txid``)."""
    return {
        column.key: bindparam(column.key, type_=column.type)
        for column in table.c
        if column is not table.autoincrement_column
        and (column.default is not None or column.server_default is None)
    }


class _DefaultContext:
    """What a column's default function may ask of its statement (``TimestampMixin``)."""

    def __init__(self, row: dict[str, Any]) -> None:
        self._row = row

    def get_current_parameters(self) -> dict[str, Any]:
        return self._row


def with_defaults(model: type[DeclarativeBase], row: dict[str, Any]) -> dict[str, Any]:
    """``row`` of ``model`` with the Python-side defaults of its other columns, as ``insert``
    writes it: for a row written by a statement of one's own."""
    return with_table_defaults(table_of(model), row)


def with_table_defaults(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    full = dict(row)
    for column in table.c:
        if column.key in full:
            continue
        default = column.default
        if default is None:
            full[column.key] = None
        elif default.is_callable:
            full[column.key] = default.arg(_DefaultContext(full))  # type: ignore[attr-defined]
        else:
            full[column.key] = default.arg  # type: ignore[attr-defined]
    return full


def sizes_of(params: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """The lengths of the list parameters, by name: a statement is compiled once for each."""
    return tuple(
        sorted((key, len(value)) for key, value in params.items() if isinstance(value, list))
    )


@dataclass(slots=True)
class Compiled:
    """A statement compiled for one dialect (and for given lengths of its list parameters)."""

    sql: str
    # The positional arguments: (parameter, index in a list parameter or None, bind processor,
    # the value a literal of the statement carries or _REQUIRED).
    params: tuple[tuple[str, int | None, Processor, Any], ...]
    columns: tuple[Any, ...]  # the selected (or returned) columns' types, for this dialect
    keys: tuple[str, ...]  # and their names
    dialect: Dialect
    # (column index, conversion) of the columns that have one, once the driver described them
    converters: tuple[tuple[int, Callable[[Any], Any]], ...] | None = None
    checked: set[Any] = field(default_factory=set)  # row types found to fit (``check``)

    @classmethod
    def of(cls, statement: Any, sizes: tuple[tuple[str, int], ...], dialect: Dialect) -> "Compiled":
        binds = _bind_params(statement)
        required = {p.key for p in binds if p.required}
        lengths = dict(sizes)
        if any(p.expanding for p in binds):
            # A placeholder for each element of a list parameter: IN ($3, $4, $5), rendered
            # with a stand-in value for each parameter the caller gives. (A literal list,
            # ``in_([...])``, carries its elements and is rendered as it is.)

            def sized(element: Any, **_: Any) -> Any:
                return _sized(element, lengths)

            statement = visitors.replacement_traverse(statement, {}, sized)
        compiled = statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
        if prefetch := [*compiled.insert_prefetch, *compiled.update_prefetch]:
            # defaults that SQLAlchemy's execution would compute (an onupdate timestamp)
            raise ValueError(f"give {', '.join(c.key for c in prefetch)} a value in the statement")
        params = []
        for name in compiled.positiontup or ():
            base, index = name, None
            if name not in compiled.binds:  # an element of a list parameter: "ids_3"
                base, _, number = name.rpartition("_")
                index = int(number) - 1
            bind = compiled.binds[base]
            kind = bind.type.dialect_impl(dialect)
            value = _REQUIRED if base in required else bind.effective_value
            params.append((base, index, kind.bind_processor(dialect), value))
        columns = list(statement.exported_columns)
        keys = [c.key or f"column_{i}" for i, c in enumerate(columns)]
        types = tuple(c.type.dialect_impl(dialect) for c in columns)
        return cls(compiled.string, tuple(params), types, tuple(keys), dialect)

    def check(self, into: Any) -> None:
        """Refuse a row type whose fields are not the statement's columns, in their order:
        a typed row that reads a column by the wrong name fails on first use, not silently.
        ``into``: a ``NamedTuple`` type, or a join's (``rows.Joined``)."""
        fields = getattr(into, "_fields", None)
        if fields != self.keys:
            raise TypeError(f"{into.__name__} has fields {fields}; the statement gives {self.keys}")

    def describe(self, prepared: Any) -> None:
        """How each column's value is converted, as SQLAlchemy would: some conversions depend
        on the type the driver reports (asyncpg's numerics), so they are chosen on first use,
        from the driver's description of the statement (``prepared``; sqlite3 has none)."""
        oids = [a.type.oid for a in prepared.get_attributes()] if prepared else None
        processors = (
            kind.result_processor(self.dialect, oids[i] if oids else None)
            for i, kind in enumerate(self.columns)
        )
        self.converters = tuple((i, p) for i, p in enumerate(processors) if p is not None)

    def rows(self, raw: Iterable[Sequence[Any]], make: Callable[[Any], Any]) -> list[Any]:
        """The driver's rows made by ``make`` (a named tuple's ``_make``), converted: only the
        columns that have a conversion are touched (most of a row's text and numbers have
        none)."""
        converters = self.converters
        if not converters:
            return [make(values) for values in raw]
        rows = []
        for row in raw:
            values = list(row)
            for i, process in converters:
                value = values[i]
                if value is not None:
                    values[i] = process(value)
            rows.append(make(values))
        return rows

    def arguments(self, values: dict[str, Any]) -> list[Any]:
        arguments = []
        for name, index, process, literal in self.params:
            value = values[name] if literal is _REQUIRED else values.get(name, literal)
            if index is not None:
                value = value[index]
            arguments.append(value if process is None or value is None else process(value))
        return arguments


_REQUIRED = object()  # a parameter the caller must give


def _sized(element: Any, lengths: dict[str, int]) -> BindParameter[Any] | None:
    """A parameter the caller gives, with a stand-in value: a list one with ``lengths[key]``
    elements; None: unchanged."""
    if not isinstance(element, BindParameter) or not element.required:
        return None
    if element.expanding:
        size = lengths.get(element.key, 0)
        return bindparam(element.key, [None] * size, type_=element.type, expanding=True)
    return bindparam(element.key, None, type_=element.type)


def _bind_params(statement: Any) -> list[BindParameter[Any]]:
    return [e for e in visitors.iterate(statement) if isinstance(e, BindParameter)]


def table_of(model: type[DeclarativeBase]) -> Table:
    """A model's table, for Core statements (``update(table_of(Product))``)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table
