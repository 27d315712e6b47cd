import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import sqlalchemy
from sqlalchemy import DateTime, Dialect, Enum, LargeBinary, MetaData, String, TypeDecorator
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from uuid_utils.compat import uuid7

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> uuid.UUID:
    """A new row's id: a UUIDv7 (RFC 9562), whose first 48 bits are the time in milliseconds
    and the other 74 random. Rows written together get neighbouring ids, so a batch (1500
    users and their wallets) adds to the end of each index keyed by them rather than to a
    random page per row, on SQLite and in PostgreSQL's B-trees alike. The time it tells is no
    secret here: each resource shows when it was created."""
    return uuid7()


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

    def result_processor(self, dialect: Dialect, coltype: Any) -> Callable[[Any], Any] | None:
        """On SQLite, the stored text ("2026-11-23 20:34:32.054460", naive UTC) parsed with its
        offset by Python's own parser, in one call where SQLAlchemy's way is a pattern and then
        ``process_result_value`` (a page of products has dozens of timestamps). Text in any
        other form goes the general way."""
        general = super().result_processor(dialect, coltype)
        if dialect.name != "sqlite" or general is None:
            return general
        parse = datetime.fromisoformat

        def process(value: Any) -> datetime | None:
            if value is None:
                return None
            try:
                return parse(value + "+00:00")
            except (TypeError, ValueError):
                return general(value)

        return process


class Uuid(sqlalchemy.Uuid[uuid.UUID]):
    """SQLAlchemy's ``Uuid``, read faster from SQLite, which stores it as 32 hex digits: the
    ``uuid.UUID`` is made from its number as pickle and pydantic make one, rather than by
    ``UUID.__init__``, which reads every spelling of a UUID (a page of products and their
    events has a hundred)."""

    def result_processor(self, dialect: Dialect, coltype: Any) -> Callable[[Any], Any] | None:
        general: Callable[[Any], Any] | None = super().result_processor(  # type: ignore[no-untyped-call]
            dialect, coltype
        )
        if dialect.name != "sqlite" or general is None or not self.as_uuid:
            return general

        new, set_slot, unknown = uuid.UUID.__new__, object.__setattr__, uuid.SafeUUID.unknown

        def process(value: Any) -> uuid.UUID | None:
            if value is None or len(value) != 32:
                return general(value)  # type: ignore[no-any-return]
            made = new(uuid.UUID)
            set_slot(made, "int", int(value, 16))
            set_slot(made, "is_safe", unknown)
            return made

        return process


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
    type_annotation_map = {uuid.UUID: Uuid}


class IdMixin:
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)


def _same_as_created(context: Any) -> datetime:
    """A new row's ``updated_at`` is its ``created_at``, to the microsecond."""
    return context.get_current_parameters().get("created_at") or utcnow()


class TimestampMixin:
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        UTCDateTime, default=_same_as_created, onupdate=utcnow
    )


class CustodialKeyMixin:
    """A custodial sr25519 wallet: public part readable, secret sealed (tessera.toolkit.crypto)."""

    type: Mapped[str] = mapped_column(String(32))
    custody: Mapped[str] = mapped_column(String(32))
    public_key: Mapped[bytes] = mapped_column(LargeBinary(32))
    address: Mapped[str] = mapped_column(String(64))
    secret_key_id: Mapped[str] = mapped_column(String(64))
    secret_blob: Mapped[bytes] = mapped_column(LargeBinary)
