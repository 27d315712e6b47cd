"""chain reconciliation, renewed job leases, collection attempts

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27 10:00:00

``reconciliations`` keeps each product's last check against the chain. A job's lease moves to
``lease_until`` so that ``run_after`` keeps its place in the queue while it runs (a running job's
``run_after`` was its lease end: it becomes ``lease_until``, and due now). An item may be held
outside Tessera (``nft_held_by``); a transfer says where it came from (``source``); a product
records its collection's creation before it is submitted (``nft_attempt``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "reconciliations",
        sa.Column("product_id", sa.Uuid(), nullable=False),
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("items_checked", sa.BigInteger(), nullable=False),
        sa.Column("findings", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["product_id"],
            ["products.id"],
            name=op.f("fk_reconciliations_product_id_products"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_reconciliations_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("product_id", name=op.f("pk_reconciliations")),
    )
    with op.batch_alter_table("reconciliations", schema=None) as batch_op:
        batch_op.create_index(
            "ix_reconciliations_project_checked", ["project_id", "checked_at"], unique=False
        )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE jobs SET lease_until = run_after, run_after = created_at WHERE status = 'running'"
    )
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nft_held_by", sa.String(length=64), nullable=True))
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nft_attempt", sa.JSON(), nullable=True))
    with op.batch_alter_table("item_transfers", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("source", sa.String(length=16), server_default="api", nullable=False)
        )
    with op.batch_alter_table("item_transfers", schema=None) as batch_op:
        batch_op.alter_column("source", existing_type=sa.String(length=16), server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("item_transfers", schema=None) as batch_op:
        batch_op.drop_column("source")
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.drop_column("nft_attempt")
    op.execute("UPDATE product_items SET nft_status = 'minted' WHERE nft_status = 'external'")
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.drop_column("nft_held_by")
    op.execute("UPDATE jobs SET run_after = lease_until WHERE status = 'running'")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("lease_until")
    with op.batch_alter_table("reconciliations", schema=None) as batch_op:
        batch_op.drop_index("ix_reconciliations_project_checked")
    op.drop_table("reconciliations")
