"""A project's users: a search by email or reference id (the API's lookup rules), a page of
them, and one user's profile with its wallets, holdings and reputation history."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from tessera.console.web import UserDep, page, problem, project_of
from tessera.db import DatabaseDep
from tessera.errors import AppError
from tessera.products import service as products
from tessera.schemas import MAX_LIMIT, MAX_PAGE
from tessera.users import repository, reputation_repository
from tessera.users import service as users
from tessera.users.schemas import UserFetch, UserLookup, UserPageLookup

router = APIRouter(prefix="/console", include_in_schema=False)

PAGE = 50
Page = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Search = Annotated[str, Query(max_length=1000)]
PageNumber = Annotated[int, Query(alias="page", ge=1, le=MAX_PAGE)]


def _searches(q: str) -> list[UserFetch]:
    """What ``q`` may name, in the API's order (email, then referenceId, then id): each
    identifier that ``q`` is valid as, matched exactly."""
    found = []
    for field, value in (("email", q), ("reference_id", q), ("id", q)):
        try:
            found.append(UserFetch.model_validate({field: value, "limit": PAGE}))
        except ValidationError:
            continue
    return found


@router.get("/projects/{project_id}/users", response_class=HTMLResponse)
async def users_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    project_id: uuid.UUID,
    q: Search = "",
    page_number: PageNumber = 1,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
    except AppError as error:
        return problem(request, error, "Not found")
    principal = user.principal(project)
    q = q.strip()
    found: list[repository.ListedUser] = []
    total = 0
    if q:
        for search in _searches(q):
            listed = await users.fetch_users(database, principal, query=search)
            if listed.users:
                found, total = listed.users, listed.total
                break
    else:
        query = UserFetch(limit=PAGE, offset=(page_number - 1) * PAGE)
        listed = await users.fetch_users(database, principal, query=query)
        found, total = listed.users, listed.total
    reputations = await database.read(
        reputation_repository.read_reputations, project.id, [u.id for u in found]
    )
    return page(
        request,
        "users.html",
        {
            "project": project,
            "q": q,
            "users": [(u, reputations.get(u.id, 0)) for u in found],
            "total": total,
            "page_number": page_number,
            "pages": max(1, -(-total // PAGE)),
        },
    )


@router.get("/projects/{project_id}/users/{user_id}", response_class=HTMLResponse)
async def user_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    project_id: uuid.UUID,
    user_id: uuid.UUID,
    items_page: Page = 1,
    history_page: Page = 1,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        principal = user.principal(project)
        profile = await users.get_profile(database, principal, lookup=UserLookup(id=user_id))
        holdings = await products.list_holdings(
            database, principal, query=UserPageLookup(id=user_id, page=items_page, limit=MAX_LIMIT)
        )
        history = await users.reputation_history(
            database,
            principal,
            query=UserPageLookup(id=user_id, page=history_page, limit=MAX_LIMIT),
        )
    except AppError as error:
        return problem(request, error, "Not found")
    return page(
        request,
        "users_profile.html",
        {
            "project": project,
            "profile": profile,
            "holdings": holdings,
            "history": history,
            "items_page": items_page,
            "history_page": history_page,
            "limit": MAX_LIMIT,
        },
    )
