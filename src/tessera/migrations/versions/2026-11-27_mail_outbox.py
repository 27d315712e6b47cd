"""mail outbox, projects' ticket_emails

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 12:00:00

``mails``: every email, written in the transaction of the change that causes it and sent by the
job worker, one per ``cause`` in a project. ``projects.ticket_emails``: whether the users who
receive items are emailed their tickets, off unless the project asks for it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("ticket_emails", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    op.create_table(
        "mails",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("recipient", sa.String(length=320), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("text_body", sa.Text(), nullable=False),
        sa.Column("html_body", sa.Text(), nullable=False),
        sa.Column("cause", sa.String(length=160), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_mails_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mails")),
        sa.UniqueConstraint("project_id", "cause", name=op.f("uq_mails_project_id_cause")),
    )
    with op.batch_alter_table("mails", schema=None) as batch_op:
        batch_op.create_index("ix_mails_status_next_attempt_at", ["status", "next_attempt_at"])
        batch_op.create_index("ix_mails_project_created", ["project_id", "created_at"])


def downgrade() -> None:
    with op.batch_alter_table("mails", schema=None) as batch_op:
        batch_op.drop_index("ix_mails_project_created")
        batch_op.drop_index("ix_mails_status_next_attempt_at")
    op.drop_table("mails")
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_column("ticket_emails")
