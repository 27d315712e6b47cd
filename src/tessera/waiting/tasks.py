"""The worker's chore that moves waiting lists no request moves: offers that lapsed (the
stock they kept goes to the next in line), and seats that came back to a seated product as
holds expired, were released or unblocked, or as orders were cancelled."""

import uuid

from tessera.db import Database, rerun_on_conflict
from tessera.jobs.worker import Chore
from tessera.models.base import unix_now, utcnow
from tessera.waiting import repository, rules

INTERVAL_SECONDS = 5.0
_PRODUCTS = 100  # lines moved in one round, each in its own transaction


def offers_chore(hash_key: bytes, interval: float = INTERVAL_SECONDS) -> Chore:
    async def move_lines(database: Database) -> int:
        """Move the lines that may have moved; how many."""
        due = await database.read(repository.due, unix_now(), _PRODUCTS)
        for project_id, product_id in due:
            await _move(database, project_id, product_id, hash_key)
        return len(due)

    return interval, move_lines


@rerun_on_conflict
async def _move(
    database: Database, project_id: uuid.UUID, product_id: uuid.UUID, hash_key: bytes
) -> None:
    async with database.transaction() as tx:
        await rules.move_line(tx, project_id, product_id, hash_key=hash_key, now=utcnow())
        await tx.commit()
