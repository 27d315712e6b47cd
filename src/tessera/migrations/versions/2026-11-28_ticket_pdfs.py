"""printable tickets: the paper of a project's ticket PDFs, the PDFs in its ticket emails

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 09:00:00

``projects.paper`` ("a4" or "letter") sizes ``GET /tickets/{token}/ticket.pdf``;
``projects.ticket_pdf_in_emails`` attaches each ticket's PDF to ticket emails, whose
``mails.ticket_pdfs`` names the tickets (item id, ticket version) the sender renders.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("paper", sa.String(length=8), server_default="a4", nullable=False)
        )
        batch_op.add_column(
            sa.Column(
                "ticket_pdf_in_emails", sa.Boolean(), server_default=sa.false(), nullable=False
            )
        )
    with op.batch_alter_table("mails", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ticket_pdfs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mails", schema=None) as batch_op:
        batch_op.drop_column("ticket_pdfs")
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_column("ticket_pdf_in_emails")
        batch_op.drop_column("paper")
