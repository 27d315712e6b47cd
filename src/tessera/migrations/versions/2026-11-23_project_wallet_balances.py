"""project wallet balances

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 17:30:00

The last native balance the job worker read of each project wallet on each configured chain,
shown by ``GET /metrics`` (tessera.metrics).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "project_wallet_balances",
        sa.Column("project_wallet_id", sa.Uuid(), nullable=False),
        sa.Column("chain", sa.String(length=32), nullable=False),
        sa.Column("free", sa.String(length=40), nullable=False),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_wallet_id"],
            ["project_wallets.id"],
            name=op.f("fk_project_wallet_balances_project_wallet_id_project_wallets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "project_wallet_id", "chain", name=op.f("pk_project_wallet_balances")
        ),
    )


def downgrade() -> None:
    op.drop_table("project_wallet_balances")
