"""the offline door: check-in keys, scans made offline

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 04:00:00

``checkin_keys`` keeps each project's Ed25519 keys for signed ticket secrets (made on first
use; ``tessera project rotate-checkin-key``). A scan keeps the device that made it offline,
when it was made, and the scan it conflicts with.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "checkin_keys",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("kid", sa.String(length=8), nullable=False),
        sa.Column("public_key", sa.LargeBinary(length=32), nullable=False),
        sa.Column("secret_key_id", sa.String(length=64), nullable=False),
        sa.Column("secret_blob", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_checkin_keys_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkin_keys")),
        sa.UniqueConstraint("project_id", "kid", name=op.f("uq_checkin_keys_project_id_kid")),
    )
    with op.batch_alter_table("checkins", schema=None) as batch_op:
        batch_op.add_column(sa.Column("device", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("scanned_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("conflict_of", sa.Uuid(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_checkins_conflict_of_checkins"), "checkins", ["conflict_of"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("checkins", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_checkins_conflict_of_checkins"), type_="foreignkey")
        batch_op.drop_column("conflict_of")
        batch_op.drop_column("scanned_at")
        batch_op.drop_column("device")
    op.drop_table("checkin_keys")
