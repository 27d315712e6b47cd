"""Idempotency keys' records: begun, answered, forgotten, purged (see the package)."""

import json
import uuid
from datetime import timedelta

from tessera.db import Database, rerun_on_conflict
from tessera.errors import IdempotencyKeyReused, IdempotencyKeyRunning
from tessera.idempotency import repository
from tessera.idempotency.schemas import Answer, KeyScope
from tessera.models.base import utcnow

RUNNING_SECONDS = 300


class IdempotencyStore:
    def __init__(self, database: Database, *, ttl_seconds: int) -> None:
        self.database = database
        self.ttl = timedelta(seconds=ttl_seconds)

    @rerun_on_conflict
    async def begin(self, scope: KeyScope, key: str, fingerprint: str) -> uuid.UUID | Answer:
        """The record's id when this request is to run; the stored answer of the same request;
        409 while it runs; 422 for a key used with another request."""
        now = utcnow()
        running_until = now + timedelta(seconds=RUNNING_SECONDS)
        expires_at = now + self.ttl
        row = {
            "project_id": scope.project_id,
            "scope": scope.within,
            "key": key,
            "created_at": now,
            "fingerprint": fingerprint,
            "running_until": running_until,
            "expires_at": expires_at,
        }
        found = None
        while found is None:  # the record may be purged between the insert and the read
            async with self.database.transaction() as tx:
                created = await repository.create(tx, row)
                if created is not None:
                    await tx.commit()
                    return created
                found = await repository.lock_record(
                    tx, project_id=scope.project_id, scope=scope.within, key=key
                )
                if found is None:
                    continue
                abandoned = found.status_code is None and found.running_until <= now
                if found.expires_at <= now or abandoned:
                    await repository.take_over(
                        tx,
                        found.id,
                        now=now,
                        fingerprint=fingerprint,
                        running_until=running_until,
                        expires_at=expires_at,
                    )
                    await tx.commit()
                    return found.id
        if found.fingerprint != fingerprint:
            raise IdempotencyKeyReused
        if found.status_code is None:
            raise IdempotencyKeyRunning
        headers = [(name, value) for name, value in json.loads(found.headers or "[]")]
        return Answer(found.status_code, headers, found.body or b"")

    @rerun_on_conflict
    async def answered(self, record: uuid.UUID, answer: Answer) -> None:
        async with self.database.transaction() as tx:
            await repository.set_answer(
                tx,
                record,
                status=answer.status,
                headers=json.dumps(answer.headers),
                body=answer.body,
            )
            await tx.commit()

    @rerun_on_conflict
    async def forget(self, record: uuid.UUID) -> None:
        async with self.database.transaction() as tx:
            await repository.delete_record(tx, record)
            await tx.commit()


@rerun_on_conflict
async def purge_expired(database: Database) -> int:
    """Delete the records past their time (a chore of the job worker); how many."""
    async with database.transaction() as tx:
        purged = await repository.delete_expired(tx, utcnow())
        await tx.commit()
    return purged
