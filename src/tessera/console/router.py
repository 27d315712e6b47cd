"""Sign-in and sign-out, the projects, and a project's credentials and wallets."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tessera.auth.dependencies import SignInLimiterDep
from tessera.config import SettingsDep
from tessera.console import service as accounts
from tessera.console.forms import ClientForm, KeyForm, KeyLoginForm, LoginForm, ProjectForm
from tessera.console.web import (
    OperatorsOnly,
    PosterDep,
    UserDep,
    back_to,
    page,
    project_of,
    secrets_page,
    with_session,
    without_session,
)
from tessera.db import DatabaseDep
from tessera.errors import AppError, InvalidInput
from tessera.passes import repository as passes_repository
from tessera.projects import repository as projects_repository
from tessera.projects import service as projects
from tessera.projects.schemas import ApiKeyRead, ClientRead
from tessera.toolkit.crypto import BoxDep

router = APIRouter(prefix="/console", include_in_schema=False)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str = "/console") -> HTMLResponse:
    return page(request, "login.html", {"next": _safe_next(next), "error": None, "email": ""})


def _safe_next(path: str) -> str:
    """Only a console path of this site: never another host (an open redirect)."""
    if path.startswith("/console") and not path.startswith("//") and "\\" not in path:
        return path
    return "/console"


async def _signed_in(request: Request, token: str, next_path: str) -> Response:
    return with_session(RedirectResponse(_safe_next(next_path), status_code=303), request, token)


@router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    limiter: SignInLimiterDep,
    form: Annotated[LoginForm, Form()],
) -> Response:
    email, password, next = form.email, form.password, form.next
    try:
        await limiter.admit(database, address=request.client.host if request.client else "?")
        token = await accounts.sign_in(
            database, email=email, password=password, hash_key=settings.hash_key_bytes
        )
    except AppError as error:
        context = {"next": _safe_next(next), "error": error.message, "email": email}
        return page(request, "login.html", context, error.status_code)
    return await _signed_in(request, token, next)


@router.post("/login/key", response_class=HTMLResponse)
async def login_with_key(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    limiter: SignInLimiterDep,
    form: Annotated[KeyLoginForm, Form()],
) -> Response:
    api_key, next = form.api_key, form.next
    try:
        await limiter.admit(database, address=request.client.host if request.client else "?")
        token = await accounts.sign_in_with_key(
            database, api_key=api_key, hash_key=settings.hash_key_bytes
        )
    except AppError as error:
        context = {"next": _safe_next(next), "key_error": error.message, "email": ""}
        return page(request, "login.html", context, error.status_code)
    return await _signed_in(request, token, next)


@router.post("/logout")
async def logout(database: DatabaseDep, user: PosterDep) -> Response:
    await accounts.sign_out(database, user)
    return without_session(back_to("/console/login", "Signed out."))


@router.get("", response_class=HTMLResponse)
async def home(request: Request, database: DatabaseDep, user: UserDep) -> Response:
    if not user.is_operator:
        return RedirectResponse(f"/console/projects/{user.project_id}", status_code=303)
    found = await database.read(projects_repository.all_projects)
    return page(request, "projects.html", {"projects": found, "created": None})


@router.post("/projects", response_class=HTMLResponse)
async def create_project(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    box: BoxDep,
    user: PosterDep,
    form: Annotated[ProjectForm, Form()],
) -> Response:
    if not user.is_operator:
        raise OperatorsOnly("only an operator creates projects")
    name = form.name.strip()
    if not name or len(name) > 255:
        raise InvalidInput("name: 1 to 255 characters")
    created = await projects.create_project(
        database,
        name=name,
        box=box,
        hash_key=settings.hash_key_bytes,
        ss58_prefix=settings.ss58_prefix,
    )
    return secrets_page(
        request,
        f"Project {name} created",
        [
            ("Write API key", created.api_key),
            ("Token client id", created.client_id),
            ("Token client secret", created.client_secret),
        ],
        f"/console/projects/{created.project_id}",
    )


@router.get("/projects/{project_id}", response_class=HTMLResponse)
async def project_page(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: UserDep,
    project_id: uuid.UUID,
) -> Response:
    project = await project_of(database, user, project_id)
    keys = await projects.list_api_keys(database, project_id=project.id)
    clients = await projects.list_token_clients(database, project_id=project.id)
    wallets = await database.read(projects_repository.wallet_balances, project.id)
    return page(
        request,
        "project.html",
        {
            "project": project,
            "keys": [ApiKeyRead.model_validate(key) for key in keys],
            "clients": [ClientRead.model_validate(client) for client in clients],
            "wallets": wallets,
            "chains": {chain.name: chain for chain in settings.configured_chains()},
            "mail_configured": settings.smtp_url is not None,
            "phone_wallets": {
                "apple": settings.apple_pass_type_id,
                "google": settings.google_wallet_issuer_id,
            },
            "has_logo": await database.read(passes_repository.has_logo, project.id),
        },
    )


@router.post("/projects/{project_id}/keys", response_class=HTMLResponse)
async def create_key(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    form: Annotated[KeyForm, Form()],
) -> Response:
    project = await project_of(database, user, project_id)
    created = await projects.issue_api_key(
        database,
        project_id=project.id,
        permission=form.permission,
        hash_key=settings.hash_key_bytes,
        expires_in=form.expires_in(),
        name=form.name.strip() or None,
    )
    return secrets_page(
        request,
        f"A {form.permission} key for {project.name}",
        [("API key", created.api_key)],
        f"/console/projects/{project.id}",
    )


@router.post("/projects/{project_id}/keys/{key_id}/revoke")
async def revoke_key(
    database: DatabaseDep, user: PosterDep, project_id: uuid.UUID, key_id: uuid.UUID
) -> Response:
    project = await project_of(database, user, project_id)
    await projects.revoke_api_key(database, project_id=project.id, key_id=key_id)
    return back_to(f"/console/projects/{project.id}", "The key is revoked.")


@router.post("/projects/{project_id}/clients", response_class=HTMLResponse)
async def create_client(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    form: Annotated[ClientForm, Form()],
) -> Response:
    project = await project_of(database, user, project_id)
    created = await projects.create_token_client(
        database,
        project_id=project.id,
        permission=form.permission,
        hash_key=settings.hash_key_bytes,
    )
    return secrets_page(
        request,
        f"A {form.permission} token client for {project.name}",
        [("Client id", created.client_id), ("Client secret", created.client_secret)],
        f"/console/projects/{project.id}",
    )


@router.post("/projects/{project_id}/clients/{client_id}/revoke")
async def revoke_client(
    database: DatabaseDep, user: PosterDep, project_id: uuid.UUID, client_id: str
) -> Response:
    project = await project_of(database, user, project_id)
    await projects.revoke_token_client(database, project_id=project.id, client_id=client_id)
    return back_to(f"/console/projects/{project.id}", "The client is revoked.")
