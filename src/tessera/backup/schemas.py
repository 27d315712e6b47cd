"""A backup's manifest and what the commands report."""

from datetime import datetime
from typing import Literal

from tessera.schemas import SnakeModel

FORMAT: Literal[1] = 1


class Contents(SnakeModel):
    """What a database holds, read in one snapshot: in a backup's, what its data file holds."""

    schema_head: str
    """The Alembic revision of its schema."""
    row_counts: dict[str, int]
    """Rows per table of the models."""
    key_ids: list[str]
    """The ids of the keys its sealed secrets (custodial wallets, signing, webhook and check-in
    keys) are sealed with."""


class Manifest(Contents):
    """``manifest.json``, beside the data file it describes."""

    format: Literal[1] = FORMAT
    backend: Literal["sqlite", "postgresql"]
    taken_at: datetime
    """Just before the snapshot: every write acknowledged before it is in the backup."""
    tessera: str
    """The version of Tessera that took it."""
    data_file: str
    data_bytes: int
    data_sha256: str


class BackupChecked(SnakeModel):
    """What ``verify`` and ``restore`` print: the backup, and what they opened of it."""

    path: str
    backend: Literal["sqlite", "postgresql"]
    taken_at: datetime
    schema_head: str
    code_head: str
    """This Tessera's head: the backup's is older when they differ (``tessera db upgrade``)."""
    rows: int
    secrets_opened: int
    key_ids: list[str]
