"""token client rotation, projects' require_activation

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 14:40:00

``oauth_clients.rotated_at``: a client's secret was replaced then; its tokens issued before stop
working. ``projects.require_activation``: Mufi's rule that only an activated user receives items,
attends events and sends transfers, off unless the project asks for it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rotated_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("require_activation", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_column("require_activation")
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.drop_column("rotated_at")
