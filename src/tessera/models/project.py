import uuid
from datetime import datetime
from typing import Literal

from sqlalchemy import BigInteger, ForeignKey, LargeBinary, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import (
    Base,
    CustodialKeyMixin,
    IdMixin,
    TimestampMixin,
    UTCDateTime,
    Uuid,
    utcnow,
)

# What a credential may do; a write credential may also read.
Permission = Literal["read", "write"]
# The paper a ticket's PDF is printed on (``tessera project set --paper``).
Paper = Literal["a4", "letter"]
# What an API key may do: also ``checkin``, the door's (scan, annul, upload scans, read the
# sync; 403 on every other route).
KeyPermission = Literal["read", "write", "checkin"]


class Project(IdMixin, TimestampMixin, Base):
    __tablename__ = "projects"

    name: Mapped[str] = mapped_column(String(255))
    # Kept in the transaction that creates or activates users (users.repository), so that
    # users/count and the users/fetch total read one row instead of counting a million.
    user_count: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    active_user_count: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # Mufi's rule, when the project asks for it (``tessera project set``): only an activated
    # user receives items, is registered as an attendee and sends a transfer.
    require_activation: Mapped[bool] = mapped_column(default=False, server_default=false())
    # Email of their tickets to the users who receive items (docs/email.md), when the server
    # has TESSERA_SMTP_URL: ``tessera project set --ticket-emails``, the console's project page.
    ticket_emails: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The printable ticket's page size (``GET /tickets/{token}/ticket.pdf``, docs/tickets.md).
    paper: Mapped[Paper] = mapped_column(String(8), default="a4", server_default="a4")
    # Ticket email carries each ticket's PDF as an attachment too (the link is there always).
    ticket_pdf_in_emails: Mapped[bool] = mapped_column(default=False, server_default=false())


class ProjectLogo(Base):
    """The project's logo (PNG), drawn on its tickets' wallet passes: a table of its own, so
    that reading a project never reads the image."""

    __tablename__ = "project_logos"

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    png: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ProjectWallet(IdMixin, TimestampMixin, CustodialKeyMixin, Base):
    __tablename__ = "project_wallets"

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )


class ProjectWalletBalance(Base):
    """The last native balance the job worker read of a project wallet on a chain (a chore,
    see tessera.metrics.service), which ``GET /metrics`` shows without a chain read."""

    __tablename__ = "project_wallet_balances"

    project_wallet_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("project_wallets.id", ondelete="CASCADE"), primary_key=True
    )
    chain: Mapped[str] = mapped_column(String(32), primary_key=True)
    # In the chain's smallest unit, as decimal text: a u128 on chain, more than a BIGINT holds.
    free: Mapped[str] = mapped_column(String(40))
    read_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ApiKey(IdMixin, Base):
    """An API key: only a lookup prefix and a keyed hash of the full key are stored."""

    __tablename__ = "api_keys"

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    permission: Mapped[KeyPermission] = mapped_column(String(8))
    name: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class OAuthClient(IdMixin, Base):
    """A project's client-credentials client for POST /v1/auth/token."""

    __tablename__ = "oauth_clients"

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    client_id: Mapped[str] = mapped_column(String(64), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    permission: Mapped[Permission] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # When the secret was last replaced: the client's tokens issued before stop working.
    rotated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class SigningKey(Base):
    """A key of Tessera's own token issuer; the newest signs, all recent ones verify."""

    __tablename__ = "signing_keys"

    kid: Mapped[str] = mapped_column(String(64), primary_key=True)
    algorithm: Mapped[str] = mapped_column(String(16))
    public_jwk: Mapped[str] = mapped_column(Text)
    secret_key_id: Mapped[str] = mapped_column(String(64))
    secret_blob: Mapped[bytes]
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class IdentityBinding(IdMixin, Base):
    """Binds an external OIDC identity (issuer + subject) to a project."""

    __tablename__ = "identity_bindings"
    __table_args__ = (UniqueConstraint("issuer", "subject"),)

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    issuer: Mapped[str] = mapped_column(String(512))
    subject: Mapped[str] = mapped_column(String(255))
    permission: Mapped[Permission] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
