"""Check-ins keep their outcome, not an HTTP status

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27 21:30:00

A scan's ``status`` (``ok`` or the reason it was refused) is its outcome; the status code the
API answers with follows from it (``checkins.router``), so ``status_code`` goes.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("checkins", schema=None) as batch_op:
        batch_op.drop_column("status_code")


def downgrade() -> None:
    with op.batch_alter_table("checkins", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("status_code", sa.Integer(), server_default="409", nullable=False)
        )
    op.execute(
        "UPDATE checkins SET status_code = CASE status WHEN 'ok' THEN 200 WHEN 'unknown' THEN 404"
        " ELSE 409 END"
    )
    with op.batch_alter_table("checkins", schema=None) as batch_op:
        batch_op.alter_column("status_code", existing_type=sa.Integer(), server_default=None)
