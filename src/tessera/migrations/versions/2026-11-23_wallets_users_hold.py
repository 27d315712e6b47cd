"""wallets the users hold

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 15:10:00

A user-controlled wallet has no secret here (``user_wallets.secret_*`` nullable); a user may
choose the wallet that receives mints (``users.receiving_wallet_id``, else the first custodial
one); an item records the wallet its NFT sits in (``product_items.nft_wallet_id``); linking a
wallet answers a challenge (``wallet_challenges``), and a key is linked once per project.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("user_wallets", schema=None) as batch_op:
        batch_op.alter_column("secret_key_id", existing_type=sa.String(length=64), nullable=True)
        batch_op.alter_column("secret_blob", existing_type=sa.LargeBinary(), nullable=True)
        # One wallet per key in a project: a linked address cannot be linked again.
        batch_op.drop_index("ix_user_wallets_project_public_key")
        batch_op.create_index(
            "ix_user_wallets_project_public_key", ["project_id", "public_key"], unique=True
        )
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("receiving_wallet_id", sa.Uuid(), nullable=True))
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nft_wallet_id", sa.Uuid(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_product_items_nft_wallet_id"), ["nft_wallet_id"], unique=False
        )
    op.create_table(
        "wallet_challenges",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("public_key", sa.LargeBinary(length=32), nullable=False),
        sa.Column("message", sa.String(length=512), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_wallet_challenges_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_wallet_challenges_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_wallet_challenges")),
    )
    with op.batch_alter_table("wallet_challenges", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_wallet_challenges_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("wallet_challenges", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_wallet_challenges_user_id"))
    op.drop_table("wallet_challenges")
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_product_items_nft_wallet_id"))
        batch_op.drop_column("nft_wallet_id")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("receiving_wallet_id")
    with op.batch_alter_table("user_wallets", schema=None) as batch_op:
        batch_op.drop_index("ix_user_wallets_project_public_key")
        batch_op.create_index(
            "ix_user_wallets_project_public_key", ["project_id", "public_key"], unique=False
        )
        batch_op.alter_column("secret_blob", existing_type=sa.LargeBinary(), nullable=False)
        batch_op.alter_column("secret_key_id", existing_type=sa.String(length=64), nullable=False)
