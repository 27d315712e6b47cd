"""claim limits shared by every process: the moving windows of claims and sign-ins

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28 18:30:00

``rate_hits`` keeps each attempt a moving-window limit let through until it leaves its window
(``db.windows``), so that a limit holds across processes and hosts. On PostgreSQL,
``admit_rate_hits`` tests every limit of an attempt and counts it in all of them or in none,
under a lock of each key, in one round trip. Expand-only: a release before this one never
reads either.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The keys' locks are taken in the two-key advisory space (apart from the one-key locks of the
# rest of Tessera), under this first key ("RATE"), in text order: two attempts that share keys
# never each hold what the other waits for. A VOLATILE function's statements each see what was
# committed before they start, so the counts below see every attempt counted before the locks
# were granted.
ADMIT = """
CREATE FUNCTION admit_rate_hits(
    hit_keys text[],
    hit_limits integer[],
    hit_at double precision,
    hit_span double precision,
    OUT refused integer,
    OUT retry_after double precision
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    each_key text;
    boundary double precision;
BEGIN
    FOR each_key IN SELECT DISTINCT k FROM unnest(hit_keys) AS k ORDER BY k LOOP
        PERFORM pg_advisory_xact_lock(1380013125, hashtext(each_key));
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(hit_keys, 1), 0) LOOP
        IF hit_limits[i] < 1 THEN
            refused := i - 1;
            retry_after := hit_span;
            RETURN;
        END IF;
        -- The newest hit that must leave before another fits: the limit's n-th newest.
        SELECT expires INTO boundary FROM rate_hits
            WHERE key = hit_keys[i] AND expires > hit_at
            ORDER BY expires DESC OFFSET hit_limits[i] - 1 LIMIT 1;
        IF FOUND THEN
            refused := i - 1;
            retry_after := boundary - hit_at;
            RETURN;
        END IF;
    END LOOP;
    DELETE FROM rate_hits WHERE key = ANY (hit_keys) AND expires <= hit_at;
    INSERT INTO rate_hits (key, expires) SELECT k, hit_at + hit_span FROM unnest(hit_keys) AS k;
END;
$$
"""


def upgrade() -> None:
    op.create_table(
        "rate_hits",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("expires", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rate_hits")),
    )
    op.create_index("ix_rate_hits_expires", "rate_hits", ["expires"], unique=False)
    op.create_index("ix_rate_hits_key_expires", "rate_hits", ["key", "expires"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(ADMIT)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "DROP FUNCTION admit_rate_hits(text[], integer[], double precision, double precision)"
        )
    op.drop_index("ix_rate_hits_key_expires", table_name="rate_hits")
    op.drop_index("ix_rate_hits_expires", table_name="rate_hits")
    op.drop_table("rate_hits")
