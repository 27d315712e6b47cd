"""users numbered in their project

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24 00:30:00

Each user gets its number in its project (1, 2, 3... in the order they were created), and
users/fetch reads a page as the users numbered after its offset, through one index, instead of
stepping over ``offset`` entries of an index: at offset 999,000 of a million users that was a
million entries. The (project, created_at, id) index that ordered the pages goes.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("number", sa.BigInteger(), nullable=True))
    # In the order users/fetch listed them until now.
    op.execute(
        """
        UPDATE users SET number = numbered.n
        FROM (
            SELECT id, row_number() OVER (PARTITION BY project_id ORDER BY created_at, id) AS n
            FROM users
        ) AS numbered
        WHERE users.id = numbered.id
        """
    )
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.alter_column("number", existing_type=sa.BigInteger(), nullable=False)
        batch_op.create_unique_constraint(
            batch_op.f("uq_users_project_id_number"), ["project_id", "number"]
        )
        batch_op.drop_index("ix_users_project_created")


def downgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.create_index(
            "ix_users_project_created", ["project_id", "created_at", "id"], unique=False
        )
        batch_op.drop_constraint(batch_op.f("uq_users_project_id_number"), type_="unique")
        batch_op.drop_column("number")
