"""User queries shared by every domain that names a user (attendees, items, orders)."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Select, bindparam, func, select, update

from tessera.db import NotIndexed, Rows, Transaction, table_of
from tessera.errors import UserNotFound
from tessera.models import Project, User, UserWallet
from tessera.users.schemas import UserRef

COLUMNS = {"email": User.email, "reference_id": User.reference_id, "id": User.id}


USER_FIELDS = (
    User.id,
    User.is_activated,
    User.activated_on,
    User.first_name,
    User.last_name,
    User.email,
    User.reference_id,
)
WALLET_FIELDS = (UserWallet.id, UserWallet.type, UserWallet.address, UserWallet.custody)


class ProfileRow(NamedTuple):
    """A user (``USER_FIELDS``) and one of its wallets (``WALLET_FIELDS``, each ``wallet_``),
    or none: ``_PROFILE``'s rows."""

    id: uuid.UUID
    is_activated: bool
    activated_on: datetime | None
    first_name: str | None
    last_name: str | None
    email: str
    reference_id: str | None
    wallet_id: uuid.UUID | None
    wallet_type: str | None
    wallet_address: str | None
    wallet_custody: str | None


class Wallet(NamedTuple):
    """A wallet as ``WalletRead`` reads it."""

    id: uuid.UUID
    type: str
    address: str
    custody: str


class Profile(NamedTuple):
    """A user with its wallets, oldest first: ``UserRead``'s fields."""

    id: uuid.UUID
    is_activated: bool
    activated_on: datetime | None
    first_name: str | None
    last_name: str | None
    email: str
    reference_id: str | None
    wallets: list[Wallet]


def _profile_statement(field: str) -> Select[*tuple[Any, ...]]:
    wallet_columns = [column.label(f"wallet_{column.key}") for column in WALLET_FIELDS]
    return (
        select(*USER_FIELDS, *wallet_columns)
        .outerjoin(UserWallet, UserWallet.user_id == User.id)
        .where(User.project_id == bindparam("project_id"), COLUMNS[field] == bindparam("value"))
        .order_by(UserWallet.created_at)
    )


# Built once: SQLAlchemy then finds the compiled form without rebuilding the statement.
_PROFILE = {field: _profile_statement(field) for field in COLUMNS}
_WALLET_AT = len(USER_FIELDS)  # where a profile row's wallet starts


async def read_profile(rows: Rows, project_id: uuid.UUID, ref: UserRef) -> Profile | None:
    """A user and its wallets, oldest first, in one statement (a read for ``Database.read``)."""
    found = await rows.all(_PROFILE[ref.field], ProfileRow, project_id=project_id, value=ref.value)
    if not found:
        return None
    wallets = [Wallet._make(row[_WALLET_AT:]) for row in found if row.wallet_id is not None]
    user = found[0]
    return Profile(
        user.id,
        user.is_activated,
        user.activated_on,
        user.first_name,
        user.last_name,
        user.email,
        user.reference_id,
        wallets,
    )


class UserBaseRow(NamedTuple):
    """A user as ``UserBase`` reads it (``USER_FIELDS``)."""

    id: uuid.UUID
    is_activated: bool
    activated_on: datetime | None
    first_name: str | None
    last_name: str | None
    email: str
    reference_id: str | None


class WalletSummaryRow(NamedTuple):
    """A wallet of one of a page's users, as ``WalletSummary`` reads it."""

    user_id: uuid.UUID
    type: str
    address: str
    custody: str


class ListedUser(NamedTuple):
    """A user with its wallets, oldest first: ``UserListItem``'s fields."""

    id: uuid.UUID
    is_activated: bool
    activated_on: datetime | None
    first_name: str | None
    last_name: str | None
    email: str
    reference_id: str | None
    wallets: list[WalletSummaryRow]


class UserPage(NamedTuple):
    """A page of users and the total: ``UserList``'s fields."""

    users: list[ListedUser]
    total: int


def _users_statement(field: str | None) -> Select[*tuple[Any, ...]]:
    statement = select(*USER_FIELDS).where(User.project_id == bindparam("project_id"))
    return statement if field is None else statement.where(COLUMNS[field] == bindparam("value"))


_USERS = {field: _users_statement(field) for field in (None, *COLUMNS)}
# A page, in the order the users were created. Unfiltered, it is the users numbered after the
# offset (``User.number``), found through one index whatever the offset; a filter names one
# user, so its offset skips at most that one.
_USER_PAGE = {
    field: (
        statement.where(User.number > bindparam("offset"))
        if field is None
        else statement.offset(bindparam("offset"))
    )
    .order_by(User.number)
    .limit(bindparam("limit"))
    for field, statement in _USERS.items()
}
# The total of an unfiltered listing is the project's counter; a filter names one user.
_USER_TOTAL = {
    field: select(func.count()).select_from(statement.subquery())
    for field, statement in _USERS.items()
    if field is not None
} | {None: select(Project.user_count).where(Project.id == bindparam("project_id"))}
# Listings show a wallet without its id (``WalletSummary``).
_SUMMARY_FIELDS = (UserWallet.type, UserWallet.address, UserWallet.custody)
_WALLETS_OF = (
    select(UserWallet.user_id, *_SUMMARY_FIELDS)
    .where(UserWallet.user_id.in_(bindparam("user_ids", expanding=True)))
    .order_by(UserWallet.created_at)
)
_ACTIVE_USERS = select(Project.active_user_count).where(Project.id == bindparam("project_id"))


async def read_users(
    rows: Rows, project_id: uuid.UUID, ref: UserRef | None, limit: int, offset: int
) -> UserPage:
    """A page of the project's users (oldest first) with their wallets, and the total."""
    field = None if ref is None else ref.field
    values = {"project_id": project_id, "value": None if ref is None else ref.value}
    total: int = await rows.scalar(_USER_TOTAL[field], **values) or 0
    page = await rows.all(_USER_PAGE[field], UserBaseRow, **values, limit=limit, offset=offset)
    wallets: dict[uuid.UUID, list[WalletSummaryRow]] = {user.id: [] for user in page}
    if page:
        for wallet in await rows.all(_WALLETS_OF, WalletSummaryRow, user_ids=list(wallets)):
            wallets[wallet.user_id].append(wallet)
    make = ListedUser._make
    return UserPage([make((*user, wallets[user.id])) for user in page], total)


async def count_active_users(rows: Rows, project_id: uuid.UUID) -> int:
    count: int = await rows.scalar(_ACTIVE_USERS, project_id=project_id) or 0
    return count


_PROJECTS = table_of(Project)
_COUNT_CREATED = (
    update(_PROJECTS)
    .where(_PROJECTS.c.id == bindparam("id"))
    .values(
        user_count=_PROJECTS.c.user_count + bindparam("created"),
        active_user_count=_PROJECTS.c.active_user_count + bindparam("activated"),
        updated_at=_PROJECTS.c.updated_at,
    )
    .returning(_PROJECTS.c.user_count)
)


async def count_created(
    tx: Transaction, project_id: uuid.UUID, created: int, *, activated: int = 0
) -> int:
    """Add new users (``activated`` of them active already) to the project's counters, in the
    transaction that creates them, before it writes them; the first new user's ``number``.
    On PostgreSQL this locks the project's row until the commit, so the creators of a
    project's users number them one transaction after the other."""
    count: int = await tx.scalar(
        _COUNT_CREATED, id=project_id, created=created, activated=activated
    )
    return count - created + 1


class UserRow(NamedTuple):
    """A user's whole row (``users``)."""

    project_id: uuid.UUID
    number: int
    email: str
    first_name: str | None
    last_name: str | None
    reference_id: str | None
    is_activated: bool
    activated_on: datetime | None
    reputation: int
    receiving_wallet_id: uuid.UUID | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


_ROWS = table_of(User)
# Built once: the whole user row by each lookup column, and users by ids or emails.
_USER_ROW = {
    field: select(_ROWS).where(
        _ROWS.c.project_id == bindparam("project_id"), column == bindparam("value")
    )
    for field, column in COLUMNS.items()
}
# By email the project and the email are one index's; by id the primary key finds each user
# (``NotIndexed``: not every user of the project read to find them).
_USERS_IN = {
    "id": select(_ROWS).where(
        NotIndexed(_ROWS.c.project_id) == bindparam("project_id"),
        _ROWS.c.id.in_(bindparam("values", expanding=True)),
    ),
    "email": select(_ROWS).where(
        _ROWS.c.project_id == bindparam("project_id"),
        _ROWS.c.email.in_(bindparam("values", expanding=True)),
    ),
}


async def find_user_row(rows: Rows, project_id: uuid.UUID, ref: UserRef) -> UserRow | None:
    """The user ``ref`` names, as a row (for ``Database.transaction`` and ``Database.read``)."""
    return await rows.first(_USER_ROW[ref.field], UserRow, project_id=project_id, value=ref.value)


async def get_user_row(rows: Rows, project_id: uuid.UUID, ref: UserRef) -> UserRow:
    user = await find_user_row(rows, project_id, ref)
    if user is None:
        raise UserNotFound
    return user


_ACTIVATE = (
    update(_ROWS)
    .where(_ROWS.c.id == bindparam("id"), _ROWS.c.is_activated.is_(False))
    .values(is_activated=True, activated_on=bindparam("now"), updated_at=bindparam("now"))
    .returning(_ROWS.c.activated_on)
)
_COUNT_ACTIVATED = (
    update(_PROJECTS)
    .where(_PROJECTS.c.id == bindparam("id"))
    .values(active_user_count=_PROJECTS.c.active_user_count + 1, updated_at=bindparam("now"))
)


async def activate(tx: Transaction, user: UserRow, now: datetime) -> datetime | None:
    """Activate the user once (the first ``activated_on`` stays) and count it; its
    ``activated_on`` as written, or None when it was already active."""
    activated_on: datetime | None = await tx.scalar(_ACTIVATE, id=user.id, now=now)
    if activated_on is not None:
        await tx.execute(_COUNT_ACTIVATED, id=user.project_id, now=now)
    return activated_on


async def users_by(
    rows: Rows, project_id: uuid.UUID, *, ids: Sequence[uuid.UUID], emails: Sequence[str]
) -> tuple[dict[uuid.UUID, UserRow], dict[str, UserRow]]:
    """Many users of a project at once, by id and by (lowercased) email."""
    by_id: dict[uuid.UUID, UserRow] = {}
    by_email: dict[str, UserRow] = {}
    if ids:
        found = await rows.all(
            _USERS_IN["id"], UserRow, project_id=project_id, values=list(set(ids))
        )
        by_id = {user.id: user for user in found}
    if emails:
        found = await rows.all(
            _USERS_IN["email"], UserRow, project_id=project_id, values=list(set(emails))
        )
        by_email = {user.email: user for user in found}
    return by_id, by_email


class WalletRow(NamedTuple):
    """A wallet's row (``user_wallets``)."""

    secret_key_id: str | None
    secret_blob: bytes | None
    user_id: uuid.UUID
    project_id: uuid.UUID
    created_at: datetime
    id: uuid.UUID
    type: str
    custody: str
    public_key: bytes
    address: str


class CreatedUser(NamedTuple):
    """A user's row as written (``UserRow``'s fields) with its wallets: ``UserRead``'s
    fields."""

    project_id: uuid.UUID
    number: int
    email: str
    first_name: str | None
    last_name: str | None
    reference_id: str | None
    is_activated: bool
    activated_on: datetime | None
    reputation: int
    receiving_wallet_id: uuid.UUID | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    wallets: list[WalletRow]


async def add_users(
    tx: Transaction, users: list[dict[str, Any]], wallets: list[dict[str, Any]]
) -> list[CreatedUser]:
    """Write new users and their wallets (one each, in the users' order), in one statement per
    table; the users as written, each with its wallet. A taken email or reference id raises
    IntegrityError."""
    created = await tx.insert(User, users, UserRow)
    written = await tx.insert(UserWallet, wallets, WalletRow)
    make = CreatedUser._make
    return [make((*user, [wallet])) for user, wallet in zip(created, written, strict=True)]


async def add_new_user(
    tx: Transaction, user: dict[str, Any], wallet: dict[str, Any]
) -> CreatedUser | None:
    """Write a new user and its wallet, unless a user of the project with its email exists or
    is being written by another transaction (then None, and nothing is written)."""
    created = await tx.insert_new(User, user, UserRow, unique=("project_id", "email"))
    if created is None:
        return None
    wallets = await tx.insert(UserWallet, [wallet], WalletRow)
    return CreatedUser._make((*created, wallets))


class EmailRow(NamedTuple):
    email: str


class ReferenceIdRow(NamedTuple):
    reference_id: str


# Which of a batch's emails and reference ids the project's users have already.
_TAKEN_EMAILS = select(_ROWS.c.email).where(
    _ROWS.c.project_id == bindparam("project_id"),
    _ROWS.c.email.in_(bindparam("values", expanding=True)),
)
_TAKEN_REFERENCE_IDS = select(_ROWS.c.reference_id).where(
    _ROWS.c.project_id == bindparam("project_id"),
    _ROWS.c.reference_id.in_(bindparam("values", expanding=True)),
)


async def taken_emails(rows: Rows, project_id: uuid.UUID, emails: list[str]) -> list[str]:
    found = await rows.all(_TAKEN_EMAILS, EmailRow, project_id=project_id, values=emails)
    return [row.email for row in found]


async def taken_reference_ids(
    rows: Rows, project_id: uuid.UUID, reference_ids: list[str]
) -> list[str]:
    found = await rows.all(
        _TAKEN_REFERENCE_IDS, ReferenceIdRow, project_id=project_id, values=reference_ids
    )
    return [row.reference_id for row in found]
