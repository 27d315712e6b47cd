from datetime import datetime

from sqlalchemy import Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, UTCDateTime


class WorkerHeartbeat(Base):
    """A running job worker, as it last said so: its row is written when it starts and its
    ``beat_at`` moved every ``worker_heartbeat_seconds`` (see tessera.jobs.heartbeat), and the
    row is deleted when it stops. The readiness check reads the freshest beat."""

    __tablename__ = "worker_heartbeats"
    __table_args__ = (Index("ix_worker_heartbeats_beat_at", "beat_at"),)

    worker_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    beat_at: Mapped[datetime] = mapped_column(UTCDateTime)
