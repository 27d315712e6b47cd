"""project user counters

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 08:40:00

users/count and the users/fetch total read these instead of counting the project's users.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("user_count", sa.BigInteger(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("active_user_count", sa.BigInteger(), server_default="0", nullable=False)
        )
    op.execute(
        """
        UPDATE projects SET
            user_count = (SELECT count(*) FROM users WHERE users.project_id = projects.id),
            active_user_count = (
                SELECT count(*) FROM users
                WHERE users.project_id = projects.id AND users.is_activated
            )
        """
    )


def downgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_column("active_user_count")
        batch_op.drop_column("user_count")
