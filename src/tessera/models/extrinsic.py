import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, TimestampMixin, UTCDateTime, Uuid, text_enum


class ExtrinsicStatus(StrEnum):
    """An extrinsic goes signed -> submitted -> included -> final, or ends dropped: its nonce
    went to another extrinsic, its era passed, or the pool refused it for good. A block that is
    dropped before it is final sends an included one back to submitted."""

    SIGNED = "signed"
    SUBMITTED = "submitted"
    INCLUDED = "included"
    FINAL = "final"
    DROPPED = "dropped"


# Those whose fate is not known yet: they hold their nonce.
LIVE = (ExtrinsicStatus.SIGNED, ExtrinsicStatus.SUBMITTED, ExtrinsicStatus.INCLUDED)


class Extrinsic(IdMixin, TimestampMixin, Base):
    """Every extrinsic a custodial key signed, recorded before it is submitted
    (``tessera.extrinsics``): the ledger of each signer's nonces, shared by every worker."""

    __tablename__ = "extrinsics"
    __table_args__ = (
        Index("ix_extrinsics_signer_nonce", "chain", "signer", "nonce"),
        Index("ix_extrinsics_status", "status"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    chain: Mapped[str] = mapped_column(String(32))
    signer: Mapped[str] = mapped_column(String(64))  # the signing account's public key, hex
    nonce: Mapped[int] = mapped_column(BigInteger)
    # What it does: "Nfts.mint" (NFTs with their metadata), "Nfts.transfer",
    # "Balances.transfer_keep_alive" (fees sent to holders), "Nfts.create", "System.remark".
    call: Mapped[str] = mapped_column(String(64))
    parts: Mapped[int] = mapped_column(BigInteger)
    # The parts as signed (``tessera.chain.extrinsics.parts_json``): its events are read
    # against them, whichever worker finds it landed.
    body: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    # Planck the signer may spend on it: the fee asked and the deposits it reserves.
    cost: Mapped[int] = mapped_column(BigInteger)
    # The signed bytes (hex), kept until its fate is known: submitted again while it may land.
    data: Mapped[str | None] = mapped_column(Text)
    tx_hash: Mapped[str] = mapped_column(String(66))
    # It can land in blocks valid_from to valid_until - 1 only (its mortal era).
    valid_from: Mapped[int] = mapped_column(BigInteger)
    valid_until: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[ExtrinsicStatus] = mapped_column(
        text_enum(ExtrinsicStatus), default=ExtrinsicStatus.SIGNED
    )
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    block_number: Mapped[int | None] = mapped_column(BigInteger)
    block_hash: Mapped[str | None] = mapped_column(String(66))
    block_index: Mapped[int | None] = mapped_column(BigInteger)
    fee: Mapped[int | None] = mapped_column(BigInteger)  # as paid, once it landed
    error: Mapped[str | None] = mapped_column(Text)  # why it was dropped


class MetricCount(Base):
    """A counter or histogram bucket of ``/metrics`` that the workers add to in the transaction
    of what they count, so that every process shows the same figure."""

    __tablename__ = "metric_counts"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    labels: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[float] = mapped_column(Float)
