"""Pages of rows with their related rows (a page of products with their events), read the
way each backend reads them fastest."""

from collections.abc import Callable, Hashable
from operator import attrgetter
from typing import Any, TypeVar

from sqlalchemy import Executable

from tessera.db.rows import Rows

RowT = TypeVar("RowT", bound=tuple[Any, ...])
JoinedT = TypeVar("JoinedT", bound=tuple[Any, ...])
RelatedT = TypeVar("RelatedT", bound=tuple[Any, ...])

_ID = attrgetter("id")


async def with_related(
    rows: Rows,
    *,
    joined: tuple[Executable, type[JoinedT]],
    alone: tuple[Executable, type[RowT]],
    related_in: tuple[Executable, type[RelatedT]],
    key: Callable[[JoinedT | RowT], Hashable | None],
    related_of: Callable[[JoinedT], RelatedT],
    **params: Any,
) -> list[tuple[JoinedT | RowT, RelatedT | None]]:
    """Rows (a page) each with the related row its ``key`` names, or None, one related row
    however many rows name it. On PostgreSQL in one statement, ``joined``, whose rows hold the
    related row's columns too (``related_of`` reads them): reading the related rows apart would
    cost a second round trip. On SQLite, where a statement costs none, ``alone`` reads the rows
    without them, then ``related_in`` the related rows, each once, by their ``id`` (``ids``):
    the rows then carry no columns repeated or empty."""
    if rows.on_postgresql:
        statement, joined_into = joined
        related: dict[Hashable, RelatedT] = {}
        pairs: list[tuple[JoinedT | RowT, RelatedT | None]] = []
        for row in await rows.all(statement, joined_into, **params):
            id_ = key(row)
            if id_ is not None and id_ not in related:
                related[id_] = related_of(row)
            pairs.append((row, None if id_ is None else related[id_]))
        return pairs
    statement, into = alone
    page = await rows.all(statement, into, **params)
    ids = list({id_ for row in page if (id_ := key(row)) is not None})
    found: dict[Hashable, RelatedT] = {}
    if ids:
        related_statement, related_into = related_in
        for related_row in await rows.all(related_statement, related_into, **params, ids=ids):
            found[_ID(related_row)] = related_row
    return [(row, None if (id_ := key(row)) is None else found.get(id_)) for row in page]
