import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, UTCDateTime, Uuid, utcnow


class Operator(IdMixin, Base):
    """A person who runs the instance: signs in to the console with an email and a password
    (an Argon2 hash), and sees every project."""

    __tablename__ = "operators"

    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    # Failed sign-ins in a row; at the limit the account is locked until locked_until.
    failed_sign_ins: Mapped[int] = mapped_column(Integer, default=0)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ConsoleSession(Base):
    """A signed-in browser: an operator, or a project owner who pasted the project's write
    key (then ``api_key_id`` names it, and revoking the key ends the session). The cookie holds
    the token; only its keyed hash is stored."""

    __tablename__ = "console_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    operator_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("operators.id", ondelete="CASCADE"), index=True
    )
    project_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    api_key_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
