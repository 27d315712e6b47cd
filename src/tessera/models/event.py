import uuid

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from tessera.models.base import Base, IdMixin, TimestampMixin, Uuid
from tessera.models.user import User


class Event(IdMixin, TimestampMixin, Base):
    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("project_id", "reference_id"),
        Index("ix_events_project_created", "project_id", "created_at", "id"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(Text)
    start_date: Mapped[int] = mapped_column(BigInteger)
    end_date: Mapped[int] = mapped_column(BigInteger)
    location: Mapped[str] = mapped_column(String(128))
    address: Mapped[str] = mapped_column(String(255))
    reference_id: Mapped[str | None] = mapped_column(String(255))


class Attendee(IdMixin, TimestampMixin, Base):
    __tablename__ = "attendees"
    __table_args__ = (
        UniqueConstraint("event_id", "user_id"),
        Index("ix_attendees_event_created", "event_id", "created_at", "id"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    event_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("events.id", ondelete="CASCADE"))
    user_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    registered_at: Mapped[int | None] = mapped_column(BigInteger)
    checked_in_at: Mapped[int | None] = mapped_column(BigInteger)

    user: Mapped[User] = relationship(lazy="raise")
    event: Mapped[Event] = relationship(lazy="raise")
