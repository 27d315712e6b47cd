"""nft state and job subjects

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 05:35:44.383420
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        # Rows queued before this revision share one subject: they run one at a time.
        batch_op.add_column(
            sa.Column("subject", sa.String(length=128), nullable=False, server_default="legacy")
        )
        batch_op.create_index(batch_op.f("ix_jobs_subject"), ["subject"], unique=False)

    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nft_status", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("nft_tx_hash", sa.String(length=80), nullable=True))
        batch_op.add_column(sa.Column("nft_block", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("nft_transfer_status", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("nft_transfer_tx_hash", sa.String(length=80), nullable=True))
        batch_op.add_column(sa.Column("nft_transfer_block", sa.BigInteger(), nullable=True))

    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nft_status", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("nft_collection_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.drop_column("nft_collection_id")
        batch_op.drop_column("nft_status")

    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.drop_column("nft_transfer_block")
        batch_op.drop_column("nft_transfer_tx_hash")
        batch_op.drop_column("nft_transfer_status")
        batch_op.drop_column("nft_block")
        batch_op.drop_column("nft_tx_hash")
        batch_op.drop_column("nft_status")

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_subject"))
        batch_op.drop_column("subject")
