"""The ledger's statements: each signer's extrinsics and their fates (built once)."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, select, update

from tessera.db import Rows, Transaction, table_of
from tessera.models import LIVE, Extrinsic, ExtrinsicStatus
from tessera.models.base import UTCDateTime


class ExtrinsicRow(NamedTuple):
    """An extrinsic's whole row (``extrinsics``)."""

    project_id: uuid.UUID
    chain: str
    signer: str
    nonce: int
    call: str
    parts: int
    body: list[dict[str, Any]]
    cost: int
    data: str | None
    tx_hash: str
    valid_from: int
    valid_until: int
    status: ExtrinsicStatus
    submitted_at: datetime | None
    block_number: int | None
    block_hash: str | None
    block_index: int | None
    fee: int | None
    error: str | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


_EXTRINSICS = table_of(Extrinsic)
_NOW = bindparam("now", type_=UTCDateTime())
_ID = _EXTRINSICS.c.id == bindparam("id")
_LIVE_OF_SIGNER = (
    select(*_EXTRINSICS.c)
    .where(
        _EXTRINSICS.c.chain == bindparam("chain"),
        _EXTRINSICS.c.signer == bindparam("signer"),
        _EXTRINSICS.c.status.in_(LIVE),
        _EXTRINSICS.c.nonce >= bindparam("from_nonce"),
    )
    .order_by(_EXTRINSICS.c.nonce, _EXTRINSICS.c.created_at)
)
_BY_IDS = select(*_EXTRINSICS.c).where(_EXTRINSICS.c.id.in_(bindparam("ids", expanding=True)))
# Each moves the extrinsic only from where it may come from, so that two workers following it
# write each fate once.
_SUBMITTED = (
    update(_EXTRINSICS)
    .where(_ID, _EXTRINSICS.c.status == ExtrinsicStatus.SIGNED)
    .values(status=ExtrinsicStatus.SUBMITTED, submitted_at=_NOW, updated_at=_NOW)
)
_INCLUDED = (
    update(_EXTRINSICS)
    .where(_ID, _EXTRINSICS.c.status.in_([ExtrinsicStatus.SIGNED, ExtrinsicStatus.SUBMITTED]))
    .values(
        status=ExtrinsicStatus.INCLUDED,
        block_number=bindparam("block_number"),
        block_hash=bindparam("block_hash"),
        block_index=bindparam("block_index"),
        updated_at=_NOW,
    )
)
_FINAL = (
    update(_EXTRINSICS)
    .where(_ID, _EXTRINSICS.c.status.in_(LIVE))
    .values(
        status=ExtrinsicStatus.FINAL,
        block_number=bindparam("block_number"),
        block_hash=bindparam("block_hash"),
        block_index=bindparam("block_index"),
        fee=bindparam("fee"),
        data=None,
        updated_at=_NOW,
    )
)
_UNINCLUDED = (
    update(_EXTRINSICS)
    .where(_ID, _EXTRINSICS.c.status == ExtrinsicStatus.INCLUDED)
    .values(
        status=ExtrinsicStatus.SUBMITTED,
        block_number=None,
        block_hash=None,
        block_index=None,
        updated_at=_NOW,
    )
)
_DROPPED = (
    update(_EXTRINSICS)
    .where(_EXTRINSICS.c.id.in_(bindparam("ids", expanding=True)), _EXTRINSICS.c.status.in_(LIVE))
    .values(status=ExtrinsicStatus.DROPPED, error=bindparam("error"), data=None, updated_at=_NOW)
)


async def live_of_signer(
    rows: Rows, chain: str, signer: bytes, *, from_nonce: int = 0
) -> list[ExtrinsicRow]:
    """The signer's extrinsics whose fate is not known yet, from nonce ``from_nonce`` on, by
    nonce."""
    return await rows.all(
        _LIVE_OF_SIGNER, ExtrinsicRow, chain=chain, signer=signer.hex(), from_nonce=from_nonce
    )


async def extrinsics(rows: Rows, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ExtrinsicRow]:
    found = await rows.all(_BY_IDS, ExtrinsicRow, ids=list(ids)) if ids else []
    return {row.id: row for row in found}


async def add_extrinsic(tx: Transaction, values: dict[str, Any]) -> ExtrinsicRow:
    [row] = await tx.insert(Extrinsic, [values], ExtrinsicRow)
    return row


async def mark_submitted(tx: Transaction, extrinsic_id: uuid.UUID, now: datetime) -> None:
    await tx.execute(_SUBMITTED, id=extrinsic_id, now=now)


async def mark_included(
    tx: Transaction, extrinsic_id: uuid.UUID, block: tuple[int, str, int], now: datetime
) -> None:
    number, block_hash, index = block
    await tx.execute(
        _INCLUDED,
        id=extrinsic_id,
        block_number=number,
        block_hash=block_hash,
        block_index=index,
        now=now,
    )


async def mark_final(
    tx: Transaction, extrinsic_id: uuid.UUID, block: tuple[int, str, int], fee: int, now: datetime
) -> None:
    number, block_hash, index = block
    await tx.execute(
        _FINAL,
        id=extrinsic_id,
        block_number=number,
        block_hash=block_hash,
        block_index=index,
        fee=fee,
        now=now,
    )


async def mark_unincluded(tx: Transaction, extrinsic_id: uuid.UUID, now: datetime) -> None:
    """Its block was dropped before it was final: back to submitted."""
    await tx.execute(_UNINCLUDED, id=extrinsic_id, now=now)


async def mark_dropped(
    tx: Transaction, ids: Sequence[uuid.UUID], error: str, now: datetime
) -> None:
    """They can never land (``error`` says why)."""
    if ids:
        await tx.execute(_DROPPED, ids=list(ids), error=error, now=now)
