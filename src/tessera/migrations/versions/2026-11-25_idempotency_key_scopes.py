"""idempotency keys scoped by claim link

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25 14:00:00

A public claim takes an Idempotency-Key too: its key belongs to the claim link it came through
(``scope``, the link's id), the keys of a project's credentials to the project (``scope`` empty).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("scope", sa.String(length=36), server_default="", nullable=False)
        )
    # The keys recorded so far are their projects' credentials' (the default fills them in).
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.alter_column("scope", existing_type=sa.String(length=36), server_default=None)
        batch_op.drop_constraint("uq_idempotency_keys_project_id_key", type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_idempotency_keys_project_id_scope_key"), ["project_id", "scope", "key"]
        )


def downgrade() -> None:
    op.execute("DELETE FROM idempotency_keys WHERE scope <> ''")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_constraint("uq_idempotency_keys_project_id_scope_key", type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_idempotency_keys_project_id_key"), ["project_id", "key"]
        )
        batch_op.drop_column("scope")
