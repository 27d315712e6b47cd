import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, TimestampMixin, UTCDateTime, Uuid, text_enum, utcnow


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Job(IdMixin, TimestampMixin, Base):
    """Durable work for the worker, written in the same transaction as the change needing it.

    ``status``: queued -> running -> succeeded | failed. ``run_after`` is when the job came due
    (it keeps its place in the queue while it runs); while running, ``lease_until`` is the end of
    the claiming worker's lease, which that worker renews: a job whose worker died is claimed
    again when it passes, ahead of the jobs that came due after it.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_status_run_after", "status", "run_after"),
        Index("ix_jobs_batch", "batch", "status", "run_after"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(64))
    # Jobs with the same subject never run at the same time (e.g. "item:<id>").
    subject: Mapped[str] = mapped_column(String(128), index=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[JobStatus] = mapped_column(text_enum(JobStatus), default=JobStatus.QUEUED)
    attempts: Mapped[int] = mapped_column(default=0)
    run_after: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The claim that runs it: a worker's claim takes one job, or a batch of jobs together.
    claim: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    # Jobs of one batch key (e.g. "mint:<product id>") may be claimed together, as a batch.
    batch: Mapped[str | None] = mapped_column(String(128))
    last_error: Mapped[str | None] = mapped_column(Text)
