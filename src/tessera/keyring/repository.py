"""The tables that keep a sealed secret, read a batch at a time for re-sealing and written
back. Each table's secrets are read with what their associated data names (a wallet's public
key, a signing key's kid, a webhook endpoint's id), the row's key first."""

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from sqlalchemy import Update, bindparam, select, union, update

from tessera.db import AnySelect, Rows, Transaction, table_of
from tessera.models import (
    Base,
    CheckinKey,
    ProjectWallet,
    SigningKey,
    UserWallet,
    WebhookEndpoint,
)
from tessera.models.base import utcnow
from tessera.toolkit.crypto import Sealed


class WalletSecret(NamedTuple):
    """A custodial wallet's sealed secret (a user's or a project's)."""

    id: uuid.UUID
    public_key: bytes
    secret_key_id: str
    secret_blob: bytes


class SigningKeySecret(NamedTuple):
    kid: str
    secret_key_id: str
    secret_blob: bytes


class WebhookSecret(NamedTuple):
    id: uuid.UUID
    secret_key_id: str
    secret_blob: bytes


class CheckinKeySecret(NamedTuple):
    id: uuid.UUID
    secret_key_id: str
    secret_blob: bytes


class SealedRow(Protocol):
    """What every row type of a sealed secret has: the sealing's key id and blob."""

    @property
    def secret_key_id(self) -> str: ...

    @property
    def secret_blob(self) -> bytes: ...


SecretT = TypeVar("SecretT", WalletSecret, SigningKeySecret, WebhookSecret, CheckinKeySecret)

# The model of each kind of secret, and what its rows are read as.
SEALED: dict[type[Base], type[tuple[Any, ...]]] = {
    UserWallet: WalletSecret,
    ProjectWallet: WalletSecret,
    SigningKey: SigningKeySecret,
    WebhookEndpoint: WebhookSecret,
    CheckinKey: CheckinKeySecret,
}


def _sealed_with_another_key(model: type[Base]) -> AnySelect:
    table = table_of(model)
    columns = [table.c[name] for name in SEALED[model]._fields]  # type: ignore[attr-defined]
    return (
        select(*columns)
        .where(table.c.secret_key_id != bindparam("active_key_id"))
        .order_by(columns[0])
        .limit(bindparam("limit"))
    )


def _reseal(model: type[Base]) -> Update:
    """The secret of a row (by its key, the row type's first field) sealed anew; a table that
    keeps when a row changed (``TimestampMixin``) keeps it, as the ORM did."""
    table = table_of(model)
    key = table.c[SEALED[model]._fields[0]]  # type: ignore[attr-defined]
    values: dict[str, Any] = {
        "secret_key_id": bindparam("secret_key_id"),
        "secret_blob": bindparam("secret_blob"),
    }
    if "updated_at" in table.c:
        values["updated_at"] = bindparam("now")
    return update(table).where(key == bindparam("key", type_=key.type)).values(values)


def _sealed(model: type[Base]) -> AnySelect:
    table = table_of(model)
    columns = [table.c[name] for name in SEALED[model]._fields]  # type: ignore[attr-defined]
    return select(*columns).where(table.c.secret_key_id.is_not(None)).order_by(columns[0])


def _key_ids(model: type[Base]) -> AnySelect:
    column = table_of(model).c.secret_key_id
    return select(column).where(column.is_not(None))


class _KeyId(NamedTuple):
    secret_key_id: str


_SEALED_WITH_ANOTHER_KEY: dict[type[Base], AnySelect] = {
    model: _sealed_with_another_key(model) for model in SEALED
}
_RESEAL: dict[type[Base], Update] = {model: _reseal(model) for model in SEALED}
_SEALED: dict[type[Base], AnySelect] = {model: _sealed(model) for model in SEALED}
_KEY_IDS = union(*(_key_ids(model) for model in SEALED)).order_by("secret_key_id")


async def sealed_with_another_key(
    tx: Transaction, model: type[Base], into: type[SecretT], active_key_id: str, *, limit: int
) -> list[SecretT]:
    """Up to ``limit`` rows of ``model`` (as ``into``, its ``SEALED`` row type) whose secret is
    not sealed with ``active_key_id``. (A wallet without a secret, user-controlled, is not:
    ``!=`` passes over NULL.)"""
    return await tx.all(
        _SEALED_WITH_ANOTHER_KEY[model], into, active_key_id=active_key_id, limit=limit
    )


async def reseal(
    tx: Transaction, model: type[Base], resealed: Sequence[tuple[SecretT, Sealed]]
) -> None:
    """Each row's secret replaced by its new sealing, in one round trip."""
    now = utcnow()
    await tx.execute_many(
        _RESEAL[model],
        [
            {"key": row[0], "secret_key_id": s.key_id, "secret_blob": s.blob, "now": now}
            for row, s in resealed
        ],
    )


async def sealed(rows: Rows, model: type[Base]) -> list[SealedRow]:
    """Every row of ``model`` that keeps a secret, as its ``SEALED`` row type."""
    return cast(list[SealedRow], await rows.all(_SEALED[model], SEALED[model]))


async def key_ids(rows: Rows) -> list[str]:
    """The ids of the keys the stored secrets are sealed with: the ring must hold each."""
    return [row.secret_key_id for row in await rows.all(_KEY_IDS, _KeyId)]
