"""What a backup's contents are read with: each table's rows, counted; the schema's revision
and the keys of the sealed secrets are their own packages' (``db.health``, ``keyring``)."""

from collections.abc import Iterable

from sqlalchemy import func, select, table

from tessera.db import AnySelect, Rows
from tessera.models import Base

_COUNTS: dict[str, AnySelect] = {
    modelled.name: select(func.count()).select_from(modelled)
    for modelled in Base.metadata.sorted_tables
}


async def row_counts(rows: Rows, names: Iterable[str] = _COUNTS) -> dict[str, int]:
    """Rows per table: of the models', or of ``names`` (a manifest's, which an older release
    wrote: a table this code no longer models is counted too). One statement each: run in one
    snapshot, they agree."""
    return {name: int(await rows.scalar(_count(name))) for name in names}


def _count(name: str) -> AnySelect:
    modelled = _COUNTS.get(name)
    return modelled if modelled is not None else select(func.count()).select_from(table(name))
