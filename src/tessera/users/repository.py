"""User queries shared by every domain that names a user (attendees, items, orders)."""

import uuid
from collections.abc import Sequence

from sqlalchemy import ColumnElement, Select, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload

from tessera.errors import ReputationWouldBeNegative, UserNotFound
from tessera.models import ReputationEntry, User
from tessera.users.schemas import UserRef

COLUMNS = {"email": User.email, "reference_id": User.reference_id, "id": User.id}


def named_by(ref: UserRef) -> ColumnElement[bool]:
    return COLUMNS[ref.field] == ref.value


def users_of(project_id: uuid.UUID, ref: UserRef | None = None) -> Select[User]:
    """The project's users, or the one ``ref`` names."""
    statement = select(User).where(User.project_id == project_id)
    return statement if ref is None else statement.where(named_by(ref))


async def find_user(
    session: AsyncSession, project_id: uuid.UUID, ref: UserRef, *, with_wallets: bool = False
) -> User | None:
    statement = users_of(project_id, ref)
    if with_wallets:
        statement = statement.options(selectinload(User.wallets))
    return await session.scalar(statement)


async def get_user(
    session: AsyncSession, project_id: uuid.UUID, ref: UserRef, *, with_wallets: bool = False
) -> User:
    user = await find_user(session, project_id, ref, with_wallets=with_wallets)
    if user is None:
        raise UserNotFound
    return user


async def users_by(
    session: AsyncSession, project_id: uuid.UUID, *, ids: Sequence[uuid.UUID], emails: Sequence[str]
) -> tuple[dict[uuid.UUID, User], dict[str, User]]:
    """Load many users of a project at once, by id and by (lowercased) email."""
    by_id: dict[uuid.UUID, User] = {}
    by_email: dict[str, User] = {}
    if ids:
        for user in await session.scalars(users_of(project_id).where(User.id.in_(set(ids)))):
            by_id[user.id] = user
    if emails:
        for user in await session.scalars(users_of(project_id).where(User.email.in_(set(emails)))):
            by_email[user.email] = user
    return by_id, by_email


async def add_reputation(
    session: AsyncSession, user: User, *, delta: int, reason: str
) -> ReputationEntry:
    """Atomically move a user's balance (never below 0) and record the entry."""
    balance = await session.scalar(
        update(User)
        .where(User.id == user.id, User.reputation + delta >= 0)
        .values(reputation=User.reputation + delta)
        .returning(User.reputation)
    )
    if balance is None:
        raise ReputationWouldBeNegative(
            f"reputation balance cannot go below 0 (balance {user.reputation}, delta {delta})"
        )
    entry = ReputationEntry(
        project_id=user.project_id, user_id=user.id, delta=delta, balance=balance, reason=reason
    )
    session.add(entry)
    await session.flush()
    return entry
