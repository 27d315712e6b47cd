"""The console's view of a product's waiting list: every entry in line order with its status
and place, the offers open (until when) and those claimed or lapsed, and a form that takes an
entry off the list. Every change goes through the API's use-case (``waiting.service.remove``),
so the rules are its own: an open offer is withdrawn and passed to the next in line."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response

from tessera.config import SettingsDep
from tessera.console.web import PosterDep, UserDep, back_to, page, problem, project_of
from tessera.db import DatabaseDep
from tessera.errors import AppError
from tessera.models import EntryStatus
from tessera.products import service as products
from tessera.schemas import MAX_LIMIT, Input
from tessera.waiting import service
from tessera.waiting.schemas import EntryFilter

router = APIRouter(prefix="/console", include_in_schema=False)


class RemoveForm(Input):
    csrf: str = ""


def _path(project_id: uuid.UUID, product_id: uuid.UUID) -> str:
    return f"/console/projects/{project_id}/products/{product_id}/waiting-list"


@router.get(
    "/projects/{project_id}/products/{product_id}/waiting-list", response_class=HTMLResponse
)
async def waiting_list_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    page_number: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        principal = user.principal(project)
        product = await products.get_product(database, principal, product_id=product_id)
        listed = await service.list_entries(
            database,
            principal,
            product_id=product_id,
            query=EntryFilter(page=page_number, limit=MAX_LIMIT),
        )
        counted = await service.counts(database, principal, product_id=product_id)
    except AppError as error:
        return problem(request, error, "Not found")
    context = {
        "project": project,
        "product": product,
        "entries": listed.entries,
        "waiting": counted.get(EntryStatus.WAITING, 0),
        "offered": counted.get(EntryStatus.OFFERED, 0),
        "total": listed.pagination.total,
        "page_number": page_number,
        "pages": max(1, -(-listed.pagination.total // MAX_LIMIT)),
        "path": _path(project.id, product_id),
    }
    return page(request, "products_waiting.html", context)


@router.post(
    "/projects/{project_id}/products/{product_id}/waiting-list/{entry_id}/remove",
    response_class=HTMLResponse,
)
async def remove_entry(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    entry_id: uuid.UUID,
    form: Annotated[RemoveForm, Form()],
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        entry = await service.remove(
            database,
            user.principal(project),
            product_id=product_id,
            entry_id=entry_id,
            hash_key=settings.hash_key_bytes,
        )
    except AppError as error:
        return problem(request, error, "The entry was not removed")
    return back_to(_path(project_id, product_id), f"{entry.email} is off the waiting list.")
