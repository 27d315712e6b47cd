"""seating plans, seat holds, and the seat of a seated product's item

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28 23:30:00

``seats`` is an event's seating plan, a row a seat with its status on it (sold, blocked, held
until a time); ``seat_holds`` keeps a buyer's seats until they are bought, released or the hold
expires. A seated product (``products.seat_category``) sells the seats of one category, and its
items name their seat (``product_items.seat_*``, one item a seat at most: a unique index, built
without blocking writes on PostgreSQL). Expand-only: a release before this one never reads them,
and the columns it does not know are nullable.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "seats",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("area", sa.String(length=64), nullable=False),
        sa.Column("row", sa.String(length=32), nullable=False),
        sa.Column("number", sa.String(length=16), nullable=False),
        sa.Column("category", sa.String(length=64), nullable=True),
        sa.Column("x", sa.Double(), nullable=True),
        sa.Column("y", sa.Double(), nullable=True),
        sa.Column("area_position", sa.BigInteger(), nullable=False),
        sa.Column("row_position", sa.BigInteger(), nullable=False),
        sa.Column("seat_position", sa.BigInteger(), nullable=False),
        sa.Column("blocked", sa.Boolean(), nullable=False),
        sa.Column("hold_id", sa.Uuid(), nullable=True),
        sa.Column("held_until", sa.BigInteger(), nullable=True),
        sa.Column("item_id", sa.Uuid(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_seats_event_id_events"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_seats_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seats")),
        sa.UniqueConstraint(
            "event_id", "area", "row", "number", name=op.f("uq_seats_event_id_area_row_number")
        ),
    )
    op.create_index(
        "ix_seats_event_place",
        "seats",
        ["event_id", "area_position", "row_position", "seat_position"],
    )
    op.create_index(op.f("ix_seats_hold_id"), "seats", ["hold_id"])
    op.create_table(
        "seat_holds",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("product_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("order_item_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["product_id"],
            ["products.id"],
            name=op.f("fk_seat_holds_product_id_products"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_seat_holds_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seat_holds")),
    )
    op.create_index(op.f("ix_seat_holds_order_item_id"), "seat_holds", ["order_item_id"])
    op.create_index(op.f("ix_seat_holds_product_id"), "seat_holds", ["product_id"])
    with op.batch_alter_table("products") as batch_op:
        batch_op.add_column(sa.Column("seat_category", sa.String(length=64), nullable=True))
    with op.batch_alter_table("product_items") as batch_op:
        batch_op.add_column(sa.Column("seat_id", sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column("seat_area", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("seat_row", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("seat_number", sa.String(length=16), nullable=True))
    with op.get_context().autocommit_block():
        op.create_index(
            "uq_product_items_seat_id",
            "product_items",
            ["seat_id"],
            unique=True,
            postgresql_concurrently=True,
        )


def downgrade() -> None:
    op.drop_index("uq_product_items_seat_id", table_name="product_items")
    with op.batch_alter_table("product_items") as batch_op:
        batch_op.drop_column("seat_number")
        batch_op.drop_column("seat_row")
        batch_op.drop_column("seat_area")
        batch_op.drop_column("seat_id")
    with op.batch_alter_table("products") as batch_op:
        batch_op.drop_column("seat_category")
    op.drop_index(op.f("ix_seat_holds_product_id"), table_name="seat_holds")
    op.drop_index(op.f("ix_seat_holds_order_item_id"), table_name="seat_holds")
    op.drop_table("seat_holds")
    op.drop_index(op.f("ix_seats_hold_id"), table_name="seats")
    op.drop_index("ix_seats_event_place", table_name="seats")
    op.drop_table("seats")
