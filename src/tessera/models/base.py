import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import DateTime, Enum, LargeBinary, MetaData, String, TypeDecorator, Uuid
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


def unix_now() -> int:
    return int(utcnow().timestamp())


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in and out, on SQLite (which stores naive text) as on PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def text_enum(enum: type[StrEnum], length: int = 16) -> Enum:
    """A status column: stored as its text value in a plain VARCHAR (no database enum type, no
    CHECK constraint), read back as the Python enum."""
    return Enum(
        enum,
        native_enum=False,
        create_constraint=False,
        length=length,
        values_callable=lambda members: [member.value for member in members],
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class IdMixin:
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)


def _same_as_created(context: Any) -> datetime:
    """A new row's ``updated_at`` is its ``created_at``, to the microsecond."""
    return context.get_current_parameters().get("created_at") or utcnow()


class TimestampMixin:
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        UTCDateTime, default=_same_as_created, onupdate=utcnow
    )


class CustodialKeyMixin:
    """A custodial sr25519 wallet: public part readable, secret sealed (see tessera.crypto)."""

    type: Mapped[str] = mapped_column(String(32))
    custody: Mapped[str] = mapped_column(String(32))
    public_key: Mapped[bytes] = mapped_column(LargeBinary(32))
    address: Mapped[str] = mapped_column(String(64))
    secret_key_id: Mapped[str] = mapped_column(String(64))
    secret_blob: Mapped[bytes] = mapped_column(LargeBinary)
