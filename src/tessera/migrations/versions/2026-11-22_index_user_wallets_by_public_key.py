"""index user wallets by public key

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 06:12:42.104594
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("user_wallets", schema=None) as batch_op:
        batch_op.create_index(
            "ix_user_wallets_project_public_key", ["project_id", "public_key"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("user_wallets", schema=None) as batch_op:
        batch_op.drop_index("ix_user_wallets_project_public_key")
