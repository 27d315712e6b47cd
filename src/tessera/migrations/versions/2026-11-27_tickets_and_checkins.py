"""tickets and check-ins

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 11:00:00

Every item has a ticket (its secret and page derived from the item and ``ticket_version``,
nothing secret stored); ``checkins`` keeps every scan at the door with the answer it got.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("ticket_version", sa.BigInteger(), server_default="1", nullable=False)
        )
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.alter_column("ticket_version", existing_type=sa.BigInteger(), server_default=None)
    op.create_table(
        "checkins",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("nonce", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=24), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("answer", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=True),
        sa.Column("item_id", sa.Uuid(), nullable=True),
        sa.Column("attendee_id", sa.Uuid(), nullable=True),
        sa.Column("redemption_id", sa.Uuid(), nullable=True),
        sa.Column("checked_in_at", sa.BigInteger(), nullable=True),
        sa.Column("previous_checked_in_at", sa.BigInteger(), nullable=True),
        sa.Column("previous_redeemed_at", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("annulled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["item_id"], ["product_items.id"], name=op.f("fk_checkins_item_id_product_items")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_checkins_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkins")),
        sa.UniqueConstraint("project_id", "nonce", name=op.f("uq_checkins_project_id_nonce")),
    )
    with op.batch_alter_table("checkins", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_checkins_item_id"), ["item_id"], unique=False)
        batch_op.create_index("ix_checkins_project_created", ["project_id", "created_at"])


def downgrade() -> None:
    with op.batch_alter_table("checkins", schema=None) as batch_op:
        batch_op.drop_index("ix_checkins_project_created")
        batch_op.drop_index(batch_op.f("ix_checkins_item_id"))
    op.drop_table("checkins")
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.drop_column("ticket_version")
