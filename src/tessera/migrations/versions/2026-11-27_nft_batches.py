"""NFTs in batches: the extrinsics ledger, batch claims, metric counts

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27 18:00:00

``extrinsics`` records every extrinsic a custodial key signs before it is submitted (each
signer's nonces, shared by every worker); items and products point at the one carrying their
NFT work, and say why it waits. Jobs carry the claim that runs them and the batch key under
which several are claimed together (jobs queued before have none: each is claimed alone). ``metric_counts`` keeps the counters every process shows.
A product's ``nft_attempt`` (a creation signed before this ledger) is dropped: a collection job
that finds no ledger entry looks for an orphan collection on chain first, as it did.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "extrinsics",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("chain", sa.String(length=32), nullable=False),
        sa.Column("signer", sa.String(length=64), nullable=False),
        sa.Column("nonce", sa.BigInteger(), nullable=False),
        sa.Column("call", sa.String(length=64), nullable=False),
        sa.Column("parts", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("cost", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=True),
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("valid_from", sa.BigInteger(), nullable=False),
        sa.Column("valid_until", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("block_number", sa.BigInteger(), nullable=True),
        sa.Column("block_hash", sa.String(length=66), nullable=True),
        sa.Column("block_index", sa.BigInteger(), nullable=True),
        sa.Column("fee", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_extrinsics_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_extrinsics")),
    )
    with op.batch_alter_table("extrinsics", schema=None) as batch_op:
        batch_op.create_index(
            "ix_extrinsics_signer_nonce", ["chain", "signer", "nonce"], unique=False
        )
        batch_op.create_index("ix_extrinsics_status", ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_extrinsics_project_id"), ["project_id"], unique=False)
    op.create_table(
        "metric_counts",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("labels", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", "labels", name=op.f("pk_metric_counts")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claim", sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column("batch", sa.String(length=128), nullable=True))
        batch_op.create_index("ix_jobs_batch", ["batch", "status", "run_after"], unique=False)
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nft_extrinsic_id", sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column("nft_block_hash", sa.String(length=66), nullable=True))
        batch_op.add_column(sa.Column("nft_transfer_extrinsic_id", sa.Uuid(), nullable=True))
        batch_op.add_column(
            sa.Column("nft_transfer_block_hash", sa.String(length=66), nullable=True)
        )
        batch_op.add_column(sa.Column("nft_reason", sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column("nft_transfer_reason", sa.String(length=500), nullable=True))
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nft_extrinsic_id", sa.Uuid(), nullable=True))
        batch_op.drop_column("nft_attempt")


def downgrade() -> None:
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nft_attempt", sa.JSON(), nullable=True))
        batch_op.drop_column("nft_extrinsic_id")
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.drop_column("nft_transfer_reason")
        batch_op.drop_column("nft_reason")
        batch_op.drop_column("nft_transfer_block_hash")
        batch_op.drop_column("nft_transfer_extrinsic_id")
        batch_op.drop_column("nft_block_hash")
        batch_op.drop_column("nft_extrinsic_id")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_batch")
        batch_op.drop_column("batch")
        batch_op.drop_column("claim")
    op.drop_table("metric_counts")
    with op.batch_alter_table("extrinsics", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_extrinsics_project_id"))
        batch_op.drop_index("ix_extrinsics_status")
        batch_op.drop_index("ix_extrinsics_signer_nonce")
    op.drop_table("extrinsics")
