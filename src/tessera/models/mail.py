import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, UTCDateTime, Uuid, text_enum, utcnow


class MailStatus(StrEnum):
    QUEUED = "queued"
    # Taken by a sender, not handed to the server yet; ``next_attempt_at`` is the end of that
    # sender's lease: a sender that dies now leaves it to be taken again.
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"


class Mail(IdMixin, Base):
    """One email, written in the transaction of the change that causes it (an item issued, a
    ticket reissued, a claim link's invitation: docs/email.md) and sent by the job worker
    (``tessera.mail.sender``).

    ``cause`` names that change (``items:<first item id>:<user id>``,
    ``reissue:<item id>:<version>:<user id>``, ``claim-invite:<link id>`` ...), unique in the
    project: one cause is written, and so sent, once. ``status``: queued -> sent | failed. A
    mail is marked ``sent`` in the statement that takes it to send (at most once: a worker that
    dies while it talks to the server leaves it ``sent`` without ``sent_at``, never sends it
    twice); an attempt that the server did not take puts it back ``queued`` until
    ``next_attempt_at``. ``sent_at`` is when the server took it. The bodies hold ticket links,
    which let their holder in: once a mail is settled (sent, failed, or sent without word)
    they are emptied.
    """

    __tablename__ = "mails"
    __table_args__ = (
        UniqueConstraint("project_id", "cause"),
        Index("ix_mails_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_mails_project_created", "project_id", "created_at"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    recipient: Mapped[str] = mapped_column(String(320))
    subject: Mapped[str] = mapped_column(String(255))
    text_body: Mapped[str] = mapped_column(Text)
    html_body: Mapped[str] = mapped_column(Text)
    # The tickets whose PDF the sender attaches, rendered as it sends (``[[item id, ticket
    # version], ...]``; None: none), when the project asked for them as the mail was written.
    ticket_pdfs: Mapped[list[list[str | int]] | None] = mapped_column(JSON)
    cause: Mapped[str] = mapped_column(String(160))
    status: Mapped[MailStatus] = mapped_column(text_enum(MailStatus), default=MailStatus.QUEUED)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_error: Mapped[str | None] = mapped_column(String(500))
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
