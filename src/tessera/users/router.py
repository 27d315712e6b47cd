from fastapi import Body

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.toolkit.crypto import BoxDep
from tessera.users import service
from tessera.users.repository import Profile, UserPage
from tessera.users.schemas import (
    ActivationRead,
    ReputationAdjust,
    ReputationHistory,
    ReputationRead,
    UserCount,
    UserCreate,
    UserFetch,
    UserList,
    UserLookup,
    UserPageLookup,
    UserRead,
    UsersCreated,
)
from tessera.web.routes import project_router

router = project_router("/users", tags=["users"])


@router.post(
    "/create", status_code=201, response_model=UsersCreated, responses=responses(400, 401, 403, 409)
)
async def create_users(
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    box: BoxDep,
    users: list[UserCreate] = Body(
        min_length=1,
        max_length=service.MAX_BATCH,
        description="Each email (compared lowercased) and referenceId once in the batch, else 400.",
    ),
) -> UsersCreated:
    """Create 1-1500 users; each gets a custodial Polkadot wallet at once."""
    created = await service.create_users(
        database,
        principal,
        users=users,
        box=box,
        ss58_prefix=settings.ss58_prefix,
    )
    return UsersCreated(
        message=f"{len(created)} users created",
        users=[UserRead.model_validate(user) for user in created],
    )


@router.post("/profile", response_model=UserRead, responses=responses(400, 401, 404))
async def fetch_user(principal: ReadAccess, database: DatabaseDep, body: UserLookup) -> Profile:
    """One user with its wallets, by email, referenceId or id (in that priority)."""
    return await service.get_profile(database, principal, lookup=body)


@router.post("/fetch", response_model=UserList, responses=responses(400, 401))
async def fetch_users(
    principal: ReadAccess, database: DatabaseDep, body: UserFetch | None = None
) -> UserPage:
    """The project's users, oldest first (``limit`` 1-1000, default 10; ``offset`` default 0)."""
    return await service.fetch_users(database, principal, query=body or UserFetch())


@router.get("/count", response_model=UserCount, responses=responses(401))
async def count_users(principal: ReadAccess, database: DatabaseDep) -> UserCount:
    """Number of activated users of the project."""
    return UserCount(count=await service.count_active_users(database, principal))


@router.post("/activate", response_model=ActivationRead, responses=responses(400, 401, 403, 404))
async def activate_user(
    principal: WriteAccess, database: DatabaseDep, body: UserLookup
) -> ActivationRead:
    """Activate a user (idempotent: the first activation time is kept)."""
    return ActivationRead.model_validate(
        await service.activate_user(database, principal, lookup=body)
    )


@router.post("/activation", response_model=ActivationRead, responses=responses(400, 401, 404))
async def user_activation_status(
    principal: ReadAccess, database: DatabaseDep, body: UserLookup
) -> ActivationRead:
    """Whether a user is activated, and since when."""
    return ActivationRead.model_validate(
        await service.activation_status(database, principal, lookup=body)
    )


@router.post(
    "/reputation",
    status_code=201,
    response_model=ReputationRead,
    responses=responses(400, 401, 403, 404, 409),
)
async def adjust_reputation(
    principal: WriteAccess, database: DatabaseDep, body: ReputationAdjust
) -> ReputationRead:
    """Add a signed ``delta`` (with a ``reason``) to a user's reputation balance."""
    return ReputationRead.model_validate(
        await service.adjust_reputation(database, principal, body=body)
    )


@router.post(
    "/reputation/history", response_model=ReputationHistory, responses=responses(400, 401, 404)
)
async def get_reputation_history(
    principal: ReadAccess, database: DatabaseDep, body: UserPageLookup
) -> ReputationHistory:
    """A user's reputation balance and its entries, oldest first (``page`` from 1, ``limit``
    1-100, default 20)."""
    return await service.reputation_history(database, principal, query=body)
