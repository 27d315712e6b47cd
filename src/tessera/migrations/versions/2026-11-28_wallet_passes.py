"""phone wallets: devices that keep Apple Wallet passes current, project logos

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28 12:00:00

``pass_registrations`` is the PassKit web service's: which device keeps which ticket's pass
(its item) current, with the push token Apple gave it and the holder it registered for.
``project_logos`` keeps a project's logo (PNG) for its passes, apart from the project's row.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pass_registrations",
        sa.Column("device", sa.String(length=128), nullable=False),
        sa.Column("serial", sa.Uuid(), nullable=False),
        sa.Column("owner_id", sa.Uuid(), nullable=False),
        sa.Column("push_token", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["serial"],
            ["product_items.id"],
            name=op.f("fk_pass_registrations_serial_product_items"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("device", "serial", name=op.f("pk_pass_registrations")),
    )
    op.create_index(
        op.f("ix_pass_registrations_serial"), "pass_registrations", ["serial"], unique=False
    )
    op.create_table(
        "project_logos",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("png", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_project_logos_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("project_id", name=op.f("pk_project_logos")),
    )


def downgrade() -> None:
    op.drop_table("project_logos")
    op.drop_index(op.f("ix_pass_registrations_serial"), table_name="pass_registrations")
    op.drop_table("pass_registrations")
