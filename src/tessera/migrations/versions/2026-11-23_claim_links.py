"""claim links

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 15:50:11

Links through which people claim items of an ``is_claimable`` product (``claim_links``, the
token stored as a keyed hash), the claims made through them (``claims``: one per email and
link), and an index for listing a project's orders.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "claim_links",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("product_id", sa.Uuid(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("token_hint", sa.String(length=16), nullable=False),
        sa.Column("max_claims", sa.BigInteger(), nullable=False),
        sa.Column("claims", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("reference_id", sa.String(length=255), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["product_id"], ["products.id"], name=op.f("fk_claim_links_product_id_products")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_claim_links_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_claim_links")),
        sa.UniqueConstraint(
            "project_id", "reference_id", name=op.f("uq_claim_links_project_id_reference_id")
        ),
        sa.UniqueConstraint("token_hash", name=op.f("uq_claim_links_token_hash")),
    )
    with op.batch_alter_table("claim_links", schema=None) as batch_op:
        batch_op.create_index(
            "ix_claim_links_product_created", ["product_id", "created_at", "id"], unique=False
        )

    op.create_table(
        "claims",
        sa.Column("link_id", sa.Uuid(), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("item_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["item_id"], ["product_items.id"], name=op.f("fk_claims_item_id_product_items")
        ),
        sa.ForeignKeyConstraint(
            ["link_id"],
            ["claim_links.id"],
            name=op.f("fk_claims_link_id_claim_links"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_claims_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_claims")),
        sa.UniqueConstraint("link_id", "email", name=op.f("uq_claims_link_id_email")),
    )
    with op.batch_alter_table("claims", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_claims_user_id"), ["user_id"], unique=False)

    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.create_index(
            "ix_orders_project_created", ["project_id", "created_at", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_index("ix_orders_project_created")

    with op.batch_alter_table("claims", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_claims_user_id"))

    op.drop_table("claims")
    with op.batch_alter_table("claim_links", schema=None) as batch_op:
        batch_op.drop_index("ix_claim_links_product_created")

    op.drop_table("claim_links")
