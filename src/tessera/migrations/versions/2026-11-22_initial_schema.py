"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 05:10:29.695579
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "projects",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
    )
    op.create_table(
        "signing_keys",
        sa.Column("kid", sa.String(length=64), nullable=False),
        sa.Column("algorithm", sa.String(length=16), nullable=False),
        sa.Column("public_jwk", sa.Text(), nullable=False),
        sa.Column("secret_key_id", sa.String(length=64), nullable=False),
        sa.Column("secret_blob", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kid", name=op.f("pk_signing_keys")),
    )
    with op.batch_alter_table("signing_keys", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_signing_keys_created_at"), ["created_at"], unique=False
        )

    op.create_table(
        "api_keys",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("permission", sa.String(length=8), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_api_keys_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_project_id"), ["project_id"], unique=False)

    op.create_table(
        "events",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("start_date", sa.BigInteger(), nullable=False),
        sa.Column("end_date", sa.BigInteger(), nullable=False),
        sa.Column("location", sa.String(length=128), nullable=False),
        sa.Column("address", sa.String(length=255), nullable=False),
        sa.Column("reference_id", sa.String(length=255), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_events_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint(
            "project_id", "reference_id", name=op.f("uq_events_project_id_reference_id")
        ),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(
            "ix_events_project_created", ["project_id", "created_at", "id"], unique=False
        )

    op.create_table(
        "identity_bindings",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("issuer", sa.String(length=512), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("permission", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_identity_bindings_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_identity_bindings")),
        sa.UniqueConstraint("issuer", "subject", name=op.f("uq_identity_bindings_issuer_subject")),
    )
    with op.batch_alter_table("identity_bindings", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_identity_bindings_project_id"), ["project_id"], unique=False
        )

    op.create_table(
        "jobs",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("run_after", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_jobs_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_project_id"), ["project_id"], unique=False)
        batch_op.create_index("ix_jobs_status_run_after", ["status", "run_after"], unique=False)

    op.create_table(
        "oauth_clients",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("client_id", sa.String(length=64), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("permission", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_oauth_clients_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_clients")),
        sa.UniqueConstraint("client_id", name=op.f("uq_oauth_clients_client_id")),
    )
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_oauth_clients_project_id"), ["project_id"], unique=False
        )

    op.create_table(
        "project_wallets",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("custody", sa.String(length=32), nullable=False),
        sa.Column("public_key", sa.LargeBinary(length=32), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("secret_key_id", sa.String(length=64), nullable=False),
        sa.Column("secret_blob", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_project_wallets_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_project_wallets")),
    )
    with op.batch_alter_table("project_wallets", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_project_wallets_project_id"), ["project_id"], unique=False
        )

    op.create_table(
        "users",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("first_name", sa.String(length=255), nullable=True),
        sa.Column("last_name", sa.String(length=255), nullable=True),
        sa.Column("reference_id", sa.String(length=255), nullable=True),
        sa.Column("is_activated", sa.Boolean(), nullable=False),
        sa.Column("activated_on", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reputation", sa.BigInteger(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_users_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("project_id", "email", name=op.f("uq_users_project_id_email")),
        sa.UniqueConstraint(
            "project_id", "reference_id", name=op.f("uq_users_project_id_reference_id")
        ),
    )
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.create_index(
            "ix_users_project_created", ["project_id", "created_at", "id"], unique=False
        )

    op.create_table(
        "attendees",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("registered_at", sa.BigInteger(), nullable=True),
        sa.Column("checked_in_at", sa.BigInteger(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["events.id"],
            name=op.f("fk_attendees_event_id_events"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_attendees_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_attendees_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attendees")),
        sa.UniqueConstraint("event_id", "user_id", name=op.f("uq_attendees_event_id_user_id")),
    )
    with op.batch_alter_table("attendees", schema=None) as batch_op:
        batch_op.create_index(
            "ix_attendees_event_created", ["event_id", "created_at", "id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_attendees_user_id"), ["user_id"], unique=False)

    op.create_table(
        "orders",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("order_number", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_orders_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_orders_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_orders")),
        sa.UniqueConstraint(
            "project_id", "order_number", name=op.f("uq_orders_project_id_order_number")
        ),
    )
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_orders_user_id"), ["user_id"], unique=False)

    op.create_table(
        "products",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=True),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("price", sa.String(length=32), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("is_claimable", sa.Boolean(), nullable=False),
        sa.Column("is_transferable", sa.Boolean(), nullable=False),
        sa.Column("stock", sa.BigInteger(), nullable=True),
        sa.Column("redemption_quantity", sa.BigInteger(), nullable=False),
        sa.Column("max_per_account", sa.BigInteger(), nullable=True),
        sa.Column("min_rep_balance", sa.BigInteger(), nullable=False),
        sa.Column("metadata_uri", sa.String(length=512), nullable=True),
        sa.Column("mint_nft", sa.Boolean(), nullable=False),
        sa.Column("chain", sa.String(length=32), nullable=True),
        sa.Column("max_items", sa.BigInteger(), nullable=True),
        sa.Column("issued_count", sa.BigInteger(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["events.id"],
            name=op.f("fk_products_event_id_events"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_products_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_products")),
    )
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_products_event_id"), ["event_id"], unique=False)
        batch_op.create_index(
            "ix_products_project_created", ["project_id", "created_at", "id"], unique=False
        )

    op.create_table(
        "reputation_entries",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("delta", sa.BigInteger(), nullable=False),
        sa.Column("balance", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_reputation_entries_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_reputation_entries_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reputation_entries")),
    )
    with op.batch_alter_table("reputation_entries", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_reputation_entries_user_id"), ["user_id"], unique=False
        )

    op.create_table(
        "user_wallets",
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("custody", sa.String(length=32), nullable=False),
        sa.Column("public_key", sa.LargeBinary(length=32), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("secret_key_id", sa.String(length=64), nullable=False),
        sa.Column("secret_blob", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_user_wallets_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_user_wallets_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user_wallets")),
    )
    with op.batch_alter_table("user_wallets", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_user_wallets_project_id"), ["project_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_user_wallets_user_id"), ["user_id"], unique=False)

    op.create_table(
        "order_items",
        sa.Column("order_id", sa.Uuid(), nullable=False),
        sa.Column("product_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        sa.Column("unit_price", sa.Numeric(precision=14, scale=2), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["order_id"],
            ["orders.id"],
            name=op.f("fk_order_items_order_id_orders"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["product_id"], ["products.id"], name=op.f("fk_order_items_product_id_products")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_order_items")),
    )
    with op.batch_alter_table("order_items", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_order_items_order_id"), ["order_id"], unique=False)
        batch_op.create_index(
            "ix_order_items_product_created", ["product_id", "created_at", "id"], unique=False
        )

    op.create_table(
        "product_items",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("product_id", sa.Uuid(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("owner_id", sa.Uuid(), nullable=False),
        sa.Column("order_item_id", sa.Uuid(), nullable=True),
        sa.Column("redemption_count", sa.BigInteger(), nullable=False),
        sa.Column("redeemed_at", sa.BigInteger(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["order_item_id"],
            ["order_items.id"],
            name=op.f("fk_product_items_order_item_id_order_items"),
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_product_items_owner_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["product_id"], ["products.id"], name=op.f("fk_product_items_product_id_products")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_product_items_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_product_items")),
        sa.UniqueConstraint(
            "product_id", "item_id", name=op.f("uq_product_items_product_id_item_id")
        ),
    )
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_product_items_order_item_id"), ["order_item_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_product_items_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(
            "ix_product_items_product_owner", ["product_id", "owner_id"], unique=False
        )

    op.create_table(
        "item_transfers",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("item_id", sa.Uuid(), nullable=False),
        sa.Column("from_user_id", sa.Uuid(), nullable=False),
        sa.Column("to_user_id", sa.Uuid(), nullable=False),
        sa.Column("transferred_at", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["from_user_id"], ["users.id"], name=op.f("fk_item_transfers_from_user_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["item_id"], ["product_items.id"], name=op.f("fk_item_transfers_item_id_product_items")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_item_transfers_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["to_user_id"], ["users.id"], name=op.f("fk_item_transfers_to_user_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_item_transfers")),
    )
    with op.batch_alter_table("item_transfers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_item_transfers_item_id"), ["item_id"], unique=False)

    op.create_table(
        "redemptions",
        sa.Column("item_id", sa.Uuid(), nullable=False),
        sa.Column("nonce", sa.String(length=128), nullable=True),
        sa.Column("redemption_count", sa.BigInteger(), nullable=False),
        sa.Column("redeemed_at", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["item_id"], ["product_items.id"], name=op.f("fk_redemptions_item_id_product_items")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_redemptions")),
        sa.UniqueConstraint("item_id", "nonce", name=op.f("uq_redemptions_item_id_nonce")),
    )
    with op.batch_alter_table("redemptions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_redemptions_item_id"), ["item_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("redemptions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_redemptions_item_id"))

    op.drop_table("redemptions")
    with op.batch_alter_table("item_transfers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_item_transfers_item_id"))

    op.drop_table("item_transfers")
    with op.batch_alter_table("product_items", schema=None) as batch_op:
        batch_op.drop_index("ix_product_items_product_owner")
        batch_op.drop_index(batch_op.f("ix_product_items_owner_id"))
        batch_op.drop_index(batch_op.f("ix_product_items_order_item_id"))

    op.drop_table("product_items")
    with op.batch_alter_table("order_items", schema=None) as batch_op:
        batch_op.drop_index("ix_order_items_product_created")
        batch_op.drop_index(batch_op.f("ix_order_items_order_id"))

    op.drop_table("order_items")
    with op.batch_alter_table("user_wallets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_user_wallets_user_id"))
        batch_op.drop_index(batch_op.f("ix_user_wallets_project_id"))

    op.drop_table("user_wallets")
    with op.batch_alter_table("reputation_entries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reputation_entries_user_id"))

    op.drop_table("reputation_entries")
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.drop_index("ix_products_project_created")
        batch_op.drop_index(batch_op.f("ix_products_event_id"))

    op.drop_table("products")
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_orders_user_id"))

    op.drop_table("orders")
    with op.batch_alter_table("attendees", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_attendees_user_id"))
        batch_op.drop_index("ix_attendees_event_created")

    op.drop_table("attendees")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_index("ix_users_project_created")

    op.drop_table("users")
    with op.batch_alter_table("project_wallets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_project_wallets_project_id"))

    op.drop_table("project_wallets")
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_clients_project_id"))

    op.drop_table("oauth_clients")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_status_run_after")
        batch_op.drop_index(batch_op.f("ix_jobs_project_id"))

    op.drop_table("jobs")
    with op.batch_alter_table("identity_bindings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_identity_bindings_project_id"))

    op.drop_table("identity_bindings")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_project_created")

    op.drop_table("events")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_project_id"))

    op.drop_table("api_keys")
    with op.batch_alter_table("signing_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_signing_keys_created_at"))

    op.drop_table("signing_keys")
    op.drop_table("projects")
