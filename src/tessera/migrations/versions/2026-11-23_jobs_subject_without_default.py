"""jobs.subject without a server default

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 07:40:00

0002 gave existing rows the subject "legacy" through a server default; the model has none, so
new jobs always name their subject.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.alter_column("subject", existing_type=sa.String(length=128), server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.alter_column(
            "subject", existing_type=sa.String(length=128), server_default="legacy"
        )
