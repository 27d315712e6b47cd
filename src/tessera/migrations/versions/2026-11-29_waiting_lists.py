"""waiting lists: entries in line for a product, and the claim links that offer them stock

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-29 02:00:00

``waiting_list_entries`` is a product's line (one live entry per email). An offer is a claim
link bound to the entry's email for its quantity (``claim_links.quantity``; a seated product's
seats kept by ``claim_links.hold_id``), and the stock kept for open offers is counted on the
product (``products.waiting_list_kept``). A claim of several items is a row per item, so
``claims`` loses its unique (link, email) for a plain index: the claims of one link queue on its
row lock, which is what every release relies on. Expand-only otherwise: the new columns are
nullable or have a server default, so a release before this one writes its rows unchanged.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LIVE = sa.text("status IN ('waiting', 'offered')")


def upgrade() -> None:
    with op.batch_alter_table("products") as batch_op:
        batch_op.add_column(sa.Column("waiting_list_offer_seconds", sa.BigInteger(), nullable=True))
        batch_op.add_column(
            sa.Column("waiting_list_kept", sa.BigInteger(), server_default="0", nullable=False)
        )
    with op.batch_alter_table("claim_links") as batch_op:
        batch_op.add_column(
            sa.Column("quantity", sa.BigInteger(), server_default="1", nullable=False)
        )
        batch_op.add_column(sa.Column("hold_id", sa.Uuid(), nullable=True))
    op.create_table(
        "waiting_list_entries",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("product_id", sa.Uuid(), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("first_name", sa.String(length=255), nullable=True),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("base_url", sa.String(length=2048), nullable=False),
        sa.Column("link_id", sa.Uuid(), nullable=True),
        sa.Column("offered_at", sa.BigInteger(), nullable=True),
        sa.Column("offer_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["link_id"],
            ["claim_links.id"],
            name=op.f("fk_waiting_list_entries_link_id_claim_links"),
        ),
        sa.ForeignKeyConstraint(
            ["product_id"],
            ["products.id"],
            name=op.f("fk_waiting_list_entries_product_id_products"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_waiting_list_entries_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_waiting_list_entries")),
    )
    op.create_index(
        "ix_waiting_list_line",
        "waiting_list_entries",
        ["product_id", "status", "created_at", "id"],
    )
    op.create_index("ix_waiting_list_due", "waiting_list_entries", ["status", "offer_expires_at"])
    op.create_index(op.f("ix_waiting_list_entries_link_id"), "waiting_list_entries", ["link_id"])
    op.create_index(
        "uq_waiting_list_live_email",
        "waiting_list_entries",
        ["product_id", "email"],
        unique=True,
        sqlite_where=_LIVE,
        postgresql_where=_LIVE,
    )
    with op.get_context().autocommit_block():
        op.create_index(
            "ix_claims_link_email",
            "claims",
            ["link_id", "email"],
            postgresql_concurrently=True,
        )
    with op.batch_alter_table("claims") as batch_op:
        batch_op.drop_constraint("uq_claims_link_id_email", type_="unique")


def downgrade() -> None:
    with op.batch_alter_table("claims") as batch_op:
        batch_op.create_unique_constraint("uq_claims_link_id_email", ["link_id", "email"])
    op.drop_index("ix_claims_link_email", table_name="claims")
    op.drop_index("uq_waiting_list_live_email", table_name="waiting_list_entries")
    op.drop_index(op.f("ix_waiting_list_entries_link_id"), table_name="waiting_list_entries")
    op.drop_index("ix_waiting_list_due", table_name="waiting_list_entries")
    op.drop_index("ix_waiting_list_line", table_name="waiting_list_entries")
    op.drop_table("waiting_list_entries")
    with op.batch_alter_table("claim_links") as batch_op:
        batch_op.drop_column("hold_id")
        batch_op.drop_column("quantity")
    with op.batch_alter_table("products") as batch_op:
        batch_op.drop_column("waiting_list_kept")
        batch_op.drop_column("waiting_list_offer_seconds")
