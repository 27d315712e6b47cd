"""Backups taken, verified and restored (see the package for their shape).

A backup is only as good as the key ring that opens its custodial wallets: ``verify`` and
``restore`` refuse one whose keys ``TESSERA_SECRET_KEYS`` lacks, naming them, and open every
sealed secret of what they restored.
"""

import hashlib
import shutil
from datetime import UTC, datetime
from pathlib import Path

from cryptography.exceptions import InvalidTag
from pydantic import ValidationError

from tessera import __build__, migrations
from tessera.backup import repository
from tessera.backup.schemas import BackupChecked, Contents, Manifest
from tessera.db import Database, Rows, dumps, table_of
from tessera.db.health import schema_versions
from tessera.keyring import repository as keyring
from tessera.keyring.service import open_secret
from tessera.models import Base
from tessera.toolkit.crypto import SecretBox

MANIFEST = "manifest.json"


class BackupInvalid(ValueError):
    """A backup that cannot be trusted or restored as it is; the message says why, in one
    line."""


class BackupKeyMissing(BackupInvalid):
    """The key ring lacks a key the backup's secrets are sealed with: without it the custodial
    wallets it holds are lost."""


async def describe(rows: Rows) -> Contents:
    """What a database holds: its schema's revision, rows per table, the keys of its secrets."""
    heads = await schema_versions(rows)
    if len(heads) != 1:
        at = ", ".join(heads) or "no revision (never migrated)"
        raise BackupInvalid(f"the database's schema is at {at}: not one revision")
    return Contents(
        schema_head=heads[0],
        row_counts=await repository.row_counts(rows),
        key_ids=await keyring.key_ids(rows),
    )


async def create(database: Database, path: Path) -> Manifest:
    """Write a backup of ``database`` into ``path``, a new directory, while it serves: the data
    file first, in one snapshot with what the manifest says of it, then the manifest. A backup
    that fails half-way is removed."""
    _new_directory(path)
    try:
        taken_at = datetime.now(UTC)
        backend, contents = await dumps.dump(database, path, describe)
        return _write_manifest(path, backend, taken_at, contents)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise


def _new_directory(path: Path) -> None:
    try:
        path.mkdir(mode=0o700)  # it holds personal data and sealed secrets
    except FileExistsError:
        raise BackupInvalid(f"{path} exists: a backup is written into a new directory") from None


def _write_manifest(
    path: Path, backend: dumps.Backend, taken_at: datetime, contents: Contents
) -> Manifest:
    """The manifest of the data file in ``path``, written whole or not at all."""
    data = path / dumps.DATA_FILES[backend]
    data.chmod(0o600)
    manifest = Manifest(
        **contents.model_dump(),
        backend=backend,
        taken_at=taken_at,
        tessera=__build__,
        data_file=data.name,
        data_bytes=data.stat().st_size,
        data_sha256=_sha256(data),
    )
    written = path / f".{MANIFEST}"
    written.write_text(manifest.model_dump_json(indent=2) + "\n")
    written.chmod(0o600)
    written.rename(path / MANIFEST)
    return manifest


async def verify(box: SecretBox, database_url: str, path: Path) -> BackupChecked:
    """Check a backup without touching the configured database: its manifest, its data file's
    checksum, its schema's revision (one this Tessera knows), the ring's keys; then restore it
    into a scratch database (``dumps.scratch``: a temporary file, or a temporary database on
    the configured PostgreSQL server), count its rows against the manifest and open every
    sealed secret with the ring."""
    manifest = _checked_manifest(box, path)
    async with dumps.scratch(manifest.backend, database_url) as url:
        await dumps.restore(url, path / manifest.data_file)
        return await _examine(box, url, path, manifest)


async def restore(box: SecretBox, database_url: str, path: Path) -> BackupChecked:
    """Restore a backup into the configured database, which must be empty (any table there:
    refused, unchanged), after the checks of ``verify``; then count its rows against the
    manifest and open every sealed secret. The schema stays at the backup's revision: when it
    is older than this Tessera's, ``tessera db upgrade`` is next."""
    manifest = _checked_manifest(box, path)
    if (backend := dumps.backend_of(database_url)) != manifest.backend:
        raise BackupInvalid(
            f"a {manifest.backend} backup restores into a {manifest.backend} database, and "
            f"TESSERA_DATABASE_URL names a {backend} one"
        )
    await dumps.restore(database_url, path / manifest.data_file)
    try:
        return await _examine(box, database_url, path, manifest)
    except BackupInvalid as exc:
        raise type(exc)(f"restored, but {exc}") from None


def _checked_manifest(box: SecretBox, path: Path) -> Manifest:
    """The backup's manifest, once what can be checked without restoring it holds."""
    try:
        manifest = Manifest.model_validate_json((path / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise BackupInvalid(f"{path}: no {MANIFEST} (not a backup, or one not finished)") from None
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise BackupInvalid(f"{path / MANIFEST}: {where}: {problem['msg']}") from None
    data = path / manifest.data_file
    if Path(manifest.data_file).name != manifest.data_file or not data.is_file():
        raise BackupInvalid(f"{path}: the data file {manifest.data_file!r} is missing")
    if data.stat().st_size != manifest.data_bytes or _sha256(data) != manifest.data_sha256:
        raise BackupInvalid(f"{data}: not the file the manifest describes (size or SHA-256)")
    if manifest.schema_head not in migrations.revisions():
        raise BackupInvalid(
            f"the backup's schema is at {manifest.schema_head}, a revision this Tessera does "
            "not know: restore it with the release that took it"
        )
    if missing := [kid for kid in manifest.key_ids if kid not in box.key_ids]:
        raise BackupKeyMissing(_missing_keys(missing))
    return manifest


async def _examine(box: SecretBox, url: str, path: Path, manifest: Manifest) -> BackupChecked:
    """The restored database at ``url`` against the manifest, every secret opened. Only the
    tables the manifest names are read: a backup of an older schema lacks this code's newest."""
    database = Database(url)
    try:
        heads = await database.read(schema_versions)
        if heads != [manifest.schema_head]:
            raise BackupInvalid(f"restored at {heads}, the manifest says {manifest.schema_head}")
        counts = await database.read(repository.row_counts, manifest.row_counts)
        for table, rows in sorted(counts.items()):
            if rows != manifest.row_counts[table]:
                raise BackupInvalid(
                    f"the restored {table} has {rows} rows, the manifest says "
                    f"{manifest.row_counts[table]}"
                )
        opened = 0
        for model in keyring.SEALED:
            if table_of(model).name in manifest.row_counts:
                for row in await database.read(keyring.sealed, model):
                    _open(box, model, row)
                    opened += 1
    finally:
        await database.dispose()
    return BackupChecked(
        path=str(path),
        backend=manifest.backend,
        taken_at=manifest.taken_at,
        schema_head=manifest.schema_head,
        code_head=migrations.head(),
        rows=sum(manifest.row_counts.values()),
        secrets_opened=opened,
        key_ids=manifest.key_ids,
    )


def _open(box: SecretBox, model: type[Base], row: keyring.SealedRow) -> None:
    try:
        open_secret(box, model, row)
    except KeyError:
        raise BackupKeyMissing(_missing_keys([row.secret_key_id])) from None
    except InvalidTag:
        table = table_of(model).name
        raise BackupInvalid(
            f"a secret of {table} sealed with key {row.secret_key_id!r} does not open: "
            f"TESSERA_SECRET_KEYS's {row.secret_key_id!r} is not the key that sealed it"
        ) from None


def _missing_keys(key_ids: list[str]) -> str:
    names = ", ".join(repr(kid) for kid in key_ids)
    keys, them = ("key", "it") if len(key_ids) == 1 else ("keys", "them")
    return (
        f"the backup's secrets need {keys} {names}, which TESSERA_SECRET_KEYS lacks: without "
        f"{them} its custodial wallets do not open (add {them} to the ring, after the active key)"
    )


def _sha256(path: Path) -> str:
    with path.open("rb") as data:
        return hashlib.file_digest(data, "sha256").hexdigest()
