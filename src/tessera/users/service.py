"""User use-cases: creation with custodial wallets, lookup, listing, activation, reputation."""

import uuid
from collections import Counter
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy.exc import IntegrityError

from tessera.auth.principal import Principal
from tessera.chain.keys import new_custodial_key
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Database, Transaction, rerun_on_conflict
from tessera.errors import EmailTaken, InvalidInput, ReferenceIdTaken, UserNotFound
from tessera.models.base import new_id, utcnow
from tessera.toolkit.crypto import SecretBox
from tessera.users import repository, reputation_repository
from tessera.users.schemas import (
    ReputationAdjust,
    ReputationHistory,
    UserCreate,
    UserFetch,
    UserLookup,
    UserPageLookup,
    UserRead,
    UserRef,
)

MAX_BATCH = 1500


class NewUser(NamedTuple):
    row: dict[str, Any]
    wallet: dict[str, Any]


@rerun_on_conflict
async def create_users(
    database: Database,
    principal: Principal,
    *,
    users: list[UserCreate],
    box: SecretBox,
    ss58_prefix: int,
) -> list[repository.CreatedUser]:
    """Create a batch of users, each with a custodial Polkadot wallet, all or nothing; the
    users as written, each with its ``wallets``.

    Emails (and reference ids) must be unique within the batch (400) and the project (409).
    """
    _reject_batch_duplicates(users)
    project_id = principal.project_id
    now = utcnow()
    # One microsecond apart, so listings keep the batch's order.
    rows = [
        new_user(item, box=box, ss58_prefix=ss58_prefix, at=now + timedelta(microseconds=i))
        for i, item in enumerate(users)
    ]
    async with database.transaction() as tx:
        await _reject_taken(tx, project_id, users)
        try:
            created = await insert_users(tx, project_id, rows)
        except IntegrityError as exc:  # a concurrent request took an email or reference id
            raise EmailTaken("email or referenceId already registered in this project") from exc
        await tx.commit()
    return created


def new_user(
    user: UserCreate,
    *,
    box: SecretBox,
    ss58_prefix: int,
    at: datetime,
    activated: bool = False,
) -> NewUser:
    """The rows of a new user and its custodial Polkadot wallet (the key made here), for a
    project's ``insert_users`` or ``find_or_create_user``."""
    user_id = new_id()
    row = {
        "id": user_id,
        "email": user.email,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "reference_id": user.reference_id,
        "is_activated": activated,
        "activated_on": at if activated else None,
        "reputation": 0,
        "created_at": at,
    }
    key = new_custodial_key(box, ss58_prefix=ss58_prefix)
    wallet = {"user_id": user_id, "created_at": at, **key.columns()}
    return NewUser(row, wallet)


async def insert_users(
    tx: Transaction, project_id: uuid.UUID, users: list[NewUser]
) -> list[repository.CreatedUser]:
    """Count new users in the project's counters and write them (numbered in the batch's
    order) and their wallets; the users as written, each with its ``wallets``. A taken email or
    reference id raises IntegrityError."""
    owner = {"project_id": project_id}
    activated = sum(1 for user in users if user.row["is_activated"])
    first = await repository.count_created(tx, project_id, len(users), activated=activated)
    created = await repository.add_users(
        tx,
        [user.row | owner | {"number": first + i} for i, user in enumerate(users)],
        [user.wallet | owner for user in users],
    )
    await record(
        tx, project_id, EventType.USER_CREATED, [UserRead.model_validate(u) for u in created]
    )
    return created


async def find_or_create_user(
    tx: Transaction, project_id: uuid.UUID, user: NewUser
) -> repository.UserRow | repository.CreatedUser:
    """The project's user with ``user``'s email, or ``user`` written (wallet and counters
    too). A user that a concurrent request is creating with the same email is waited for and
    found, not duplicated (``insert_new``)."""
    ref = UserRef("email", user.row["email"])
    found = await repository.find_user_row(tx, project_id, ref)
    if found is not None:
        return found
    owner = {"project_id": project_id}
    activated = int(user.row["is_activated"])
    number = await repository.count_created(tx, project_id, 1, activated=activated)
    created = await repository.add_new_user(
        tx, user.row | owner | {"number": number}, user.wallet | owner
    )
    if created is None:  # not counted after all
        await repository.count_created(tx, project_id, -1, activated=-activated)
        return await repository.get_user_row(tx, project_id, ref)
    await record(tx, project_id, EventType.USER_CREATED, [UserRead.model_validate(created)])
    return created


def _reject_batch_duplicates(users: list[UserCreate]) -> None:
    problems = []
    for field, values in (
        ("email", [u.email for u in users]),
        ("referenceId", [u.reference_id for u in users if u.reference_id is not None]),
    ):
        for value, count in Counter(values).items():
            if count > 1:
                problems.append(f"{field}: {value!r} appears {count} times in the batch")
    if problems:
        raise InvalidInput(*problems)


async def _reject_taken(tx: Transaction, project_id: uuid.UUID, users: list[UserCreate]) -> None:
    taken = await repository.taken_emails(tx, project_id, [u.email for u in users])
    if taken:
        raise EmailTaken(
            f"email already registered in this project: {', '.join(sorted(taken)[:5])}"
        )
    refs = [u.reference_id for u in users if u.reference_id is not None]
    if refs:
        found = await repository.taken_reference_ids(tx, project_id, refs)
        if found:
            listed = ", ".join(sorted(found)[:5])
            raise ReferenceIdTaken(f"referenceId already used in this project: {listed}")


async def get_profile(
    database: Database, principal: Principal, *, lookup: UserLookup
) -> repository.Profile:
    """The user with its wallets, as ``UserRead`` reads it."""
    profile = await database.read(repository.read_profile, principal.project_id, lookup.ref())
    if profile is None:
        raise UserNotFound
    return profile


async def fetch_users(
    database: Database, principal: Principal, *, query: UserFetch
) -> repository.UserPage:
    """A page of the project's users (oldest first), optionally narrowed to one identifier, as
    ``UserList`` reads it."""
    return await database.read(
        repository.read_users, principal.project_id, query.ref_or_none(), query.limit, query.offset
    )


async def count_active_users(database: Database, principal: Principal) -> int:
    return await database.read(repository.count_active_users, principal.project_id)


@rerun_on_conflict
async def activate_user(
    database: Database, principal: Principal, *, lookup: UserLookup
) -> repository.UserRow:
    """Activate a user; activating an active user keeps its original ``activatedOn``."""
    project_id = principal.project_id
    async with database.transaction() as tx:
        user = await repository.get_user_row(tx, project_id, lookup.ref())
        if user.is_activated:
            return user
        now = utcnow()
        activated_on = await repository.activate(tx, user, now)
        if activated_on is None:  # activated meanwhile by another request
            return await repository.get_user_row(tx, project_id, lookup.ref())
        changed = await repository.read_profile(tx, project_id, UserRef("id", user.id))
        await record(tx, project_id, EventType.USER_ACTIVATED, [UserRead.model_validate(changed)])
        await tx.commit()
    return user._replace(is_activated=True, activated_on=activated_on, updated_at=activated_on)


async def activation_status(
    database: Database, principal: Principal, *, lookup: UserLookup
) -> repository.UserRow:
    """Whether the user is activated, and since when."""
    return await database.read(repository.get_user_row, principal.project_id, lookup.ref())


@rerun_on_conflict
async def adjust_reputation(
    database: Database, principal: Principal, *, body: ReputationAdjust
) -> reputation_repository.ReputationEntryRow:
    """Add a signed delta to a user's reputation; the balance never goes below 0."""
    async with database.transaction() as tx:
        user = await repository.get_user_row(tx, principal.project_id, body.ref())
        entry = await reputation_repository.add_reputation(
            tx, user, delta=body.delta, reason=body.reason
        )
        await tx.commit()
    return entry


async def reputation_history(
    database: Database, principal: Principal, *, query: UserPageLookup
) -> ReputationHistory:
    """The user's reputation balance and the entries that made it, oldest first."""
    return await database.read(
        reputation_repository.read_reputation_history,
        principal.project_id,
        query.ref(),
        query.paging(),
    )
