"""A project's webhook endpoints (add, with the secret shown once; disable, enable, delete),
an endpoint's deliveries (each replayable), and the project's change feed."""

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import StringConstraints, ValidationError

from tessera.changes import service as feed
from tessera.changes.schemas import EVENT_TYPES, START, Place
from tessera.config import Settings, SettingsDep
from tessera.console.service import ConsoleUser
from tessera.console.web import PosterDep, UserDep, back_to, page, problem, project_of
from tessera.db import Database, DatabaseDep
from tessera.errors import AppError, InvalidInput, validation_messages
from tessera.projects.repository import ProjectRow
from tessera.schemas import MAX_LIMIT, MAX_PAGE, Input, PageParams
from tessera.toolkit.crypto import BoxDep
from tessera.webhooks import service as webhooks
from tessera.webhooks.schemas import WebhookCreate, WebhookUpdate

router = APIRouter(prefix="/console", include_in_schema=False)

CHANGES_PAGE = 50
Field = Annotated[str, StringConstraints(max_length=1000)]
PageNumber = Annotated[int, Query(alias="page", ge=1, le=MAX_PAGE)]


class WebhookForm(Input):
    url: Field = ""
    # One checkbox per event type; none checked: every type.
    event_types: list[Field] = []

    def body(self) -> WebhookCreate:
        try:
            return WebhookCreate.model_validate(
                {"url": self.url.strip(), "event_types": self.event_types or None}
            )
        except ValidationError as error:
            raise InvalidInput(*validation_messages(error.errors())) from None


def _listing(project: ProjectRow) -> str:
    return f"/console/projects/{project.id}/webhooks"


@router.get("/projects/{project_id}/webhooks", response_class=HTMLResponse)
async def webhooks_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    project_id: uuid.UUID,
    page_number: PageNumber = 1,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        listed = await webhooks.list_webhooks(
            database,
            user.principal(project),
            paging=PageParams(page=page_number, limit=MAX_LIMIT),
        )
    except AppError as error:
        return problem(request, error, "Not found")
    return page(
        request,
        "webhooks.html",
        {
            "project": project,
            "webhooks": listed.webhooks,
            "pagination": listed.pagination,
            "event_types": [t.value for t in EVENT_TYPES],
        },
    )


@router.post("/projects/{project_id}/webhooks", response_class=HTMLResponse)
async def create_webhook(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    box: BoxDep,
    user: PosterDep,
    project_id: uuid.UUID,
    form: Annotated[WebhookForm, Form()],
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        created = await webhooks.create_webhook(
            database,
            user.principal(project),
            body=form.body(),
            box=box,
            allow_private=settings.webhooks_allow_private,
        )
    except AppError as error:
        return problem(request, error, "The endpoint was not added")
    return page(
        request,
        "secret_shown.html",
        {
            "project": project,
            "heading": f"Webhook endpoint {created.url} added",
            "secrets": [("Signing secret", created.secret)],
            "next": _listing(project),
        },
        201,
    )


async def _set_enabled(
    request: Request,
    database: Database,
    settings: Settings,
    user: ConsoleUser,
    project_id: uuid.UUID,
    endpoint_id: uuid.UUID,
    on: bool,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        await webhooks.update_webhook(
            database,
            user.principal(project),
            endpoint_id=endpoint_id,
            body=WebhookUpdate(enabled=on),
            allow_private=settings.webhooks_allow_private,
        )
    except AppError as error:
        return problem(request, error)
    return back_to(
        _listing(project), "The endpoint is enabled." if on else "The endpoint is disabled."
    )


@router.post("/projects/{project_id}/webhooks/{endpoint_id}/enable")
async def enable_webhook(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    endpoint_id: uuid.UUID,
) -> Response:
    return await _set_enabled(request, database, settings, user, project_id, endpoint_id, True)


@router.post("/projects/{project_id}/webhooks/{endpoint_id}/disable")
async def disable_webhook(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    endpoint_id: uuid.UUID,
) -> Response:
    return await _set_enabled(request, database, settings, user, project_id, endpoint_id, False)


@router.post("/projects/{project_id}/webhooks/{endpoint_id}/delete")
async def delete_webhook(
    request: Request,
    database: DatabaseDep,
    user: PosterDep,
    project_id: uuid.UUID,
    endpoint_id: uuid.UUID,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        await webhooks.delete_webhook(database, user.principal(project), endpoint_id=endpoint_id)
    except AppError as error:
        return problem(request, error)
    return back_to(_listing(project), "The endpoint is deleted.")


@router.get("/projects/{project_id}/webhooks/{endpoint_id}", response_class=HTMLResponse)
async def deliveries_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    project_id: uuid.UUID,
    endpoint_id: uuid.UUID,
    page_number: PageNumber = 1,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        principal = user.principal(project)
        endpoint = await webhooks.get_webhook(database, principal, endpoint_id=endpoint_id)
        listed = await webhooks.list_deliveries(
            database,
            principal,
            endpoint_id=endpoint_id,
            paging=PageParams(page=page_number, limit=MAX_LIMIT),
        )
    except AppError as error:
        return problem(request, error, "Not found")
    return page(
        request,
        "webhooks_deliveries.html",
        {
            "project": project,
            "endpoint": endpoint,
            "deliveries": listed.deliveries,
            "pagination": listed.pagination,
        },
    )


@router.post("/projects/{project_id}/webhooks/{endpoint_id}/deliveries/{delivery_id}/replay")
async def replay_delivery(
    request: Request,
    database: DatabaseDep,
    user: PosterDep,
    project_id: uuid.UUID,
    endpoint_id: uuid.UUID,
    delivery_id: uuid.UUID,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        await webhooks.replay_delivery(
            database,
            user.principal(project),
            endpoint_id=endpoint_id,
            delivery_id=delivery_id,
        )
    except AppError as error:
        return problem(request, error)
    return back_to(
        f"{_listing(project)}/{endpoint_id}", "The replay is queued: the worker sends it soon."
    )


def summary(data: dict[str, Any]) -> str:
    """What a change is about, in a few words: the object's email or name, and its id (or,
    for a change about several objects, those of the first one that has them)."""
    parts = [str(data[key]) for key in ("email", "name") if isinstance(data.get(key), str)]
    if isinstance(data.get("id"), str):
        parts.append(data["id"])
    if parts:
        return " · ".join(parts)
    for value in data.values():
        if isinstance(value, dict) and (inner := summary(value)):
            return inner
    return ""


@router.get("/projects/{project_id}/changes", response_class=HTMLResponse)
async def changes_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    project_id: uuid.UUID,
    after: Annotated[str, Query(max_length=100)] = "",
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        place = Place.of_cursor(after) if after else START
        changes = await database.read(feed.read_page, project.id, place, CHANGES_PAGE)
    except AppError as error:
        return problem(request, error)
    return page(
        request,
        "changes.html",
        {
            "project": project,
            "changes": [(change, summary(change.data)) for change in changes.events],
            "cursor": changes.cursor,
            "after": after,
            "full": len(changes.events) == CHANGES_PAGE,
        },
    )
