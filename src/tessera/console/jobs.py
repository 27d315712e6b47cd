"""The chain job queue: the jobs waiting for their project wallet to be funded, counts by
status and kind, the newest jobs with their last error (or reason to wait), and a failed job
retried. An operator sees every project's jobs; a project owner only their project's (another
project's job is 404, as one that does not exist)."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from tessera.chain.registry import ChainsDep
from tessera.console.service import ConsoleUser
from tessera.console.web import PageNotFound, PosterDep, UserDep, back_to, page, problem, project_of
from tessera.db import Database, DatabaseDep
from tessera.errors import AppError, InvalidInput
from tessera.jobs import repository
from tessera.jobs import service as jobs
from tessera.jobs.dependencies import HandlersDep
from tessera.jobs.queue import WAITING_FOR_FUNDS
from tessera.jobs.worker import JobContext
from tessera.models import JobStatus
from tessera.toolkit.crypto import BoxDep

router = APIRouter(prefix="/console", include_in_schema=False)

NEWEST = 50


def _status(value: str) -> JobStatus | None:
    if not value:
        return None
    try:
        return JobStatus(value)
    except ValueError:
        known = ", ".join(s.value for s in JobStatus)
        raise InvalidInput(f"status: one of {known}") from None


@router.get("/jobs", response_class=HTMLResponse)
async def jobs_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    status: Annotated[str, Query(max_length=1000)] = "",
) -> Response:
    try:
        shown = _status(status)
    except AppError as error:
        return problem(request, error)
    mine = None if user.is_operator else user.project_id
    counts, newest = await database.read(repository.queue, mine, shown, limit=NEWEST)
    waiting = await database.read(repository.waiting_jobs, mine, WAITING_FOR_FUNDS)
    # A project owner's nav names their project.
    project = None if mine is None else await project_of(database, user, mine)
    by_kind: dict[str, dict[str, int]] = {}
    for row in counts:
        by_kind.setdefault(row.kind, {})[row.status] = row.jobs
    totals = {s.value: sum(kind.get(s.value, 0) for kind in by_kind.values()) for s in JobStatus}
    return page(
        request,
        "jobs.html",
        {
            "project": project,
            "statuses": [s.value for s in JobStatus],
            "status": shown.value if shown else "",
            "by_kind": sorted(by_kind.items()),
            "totals": totals,
            "jobs": newest,
            "newest": NEWEST,
            "waiting": waiting,
            "waiting_total": sum(row.jobs for row in waiting),
            "funds_prefix": WAITING_FOR_FUNDS,
        },
    )


async def _check_visible(database: Database, user: ConsoleUser, job_id: uuid.UUID) -> None:
    project_id = await database.read(repository.project_of_job, job_id)
    if project_id is None or not user.may_see(project_id):
        raise PageNotFound


@router.post("/jobs/{job_id}/retry", response_class=HTMLResponse)
async def retry_job(
    request: Request,
    database: DatabaseDep,
    box: BoxDep,
    chains: ChainsDep,
    handlers: HandlersDep,
    user: PosterDep,
    job_id: uuid.UUID,
) -> Response:
    try:
        await _check_visible(database, user, job_id)
        context = JobContext(database, box, chains)
        # The app's registry of job kinds (tessera.main), which sits above the console.
        await jobs.retry_job(context, handlers, job_id=job_id)
    except AppError as error:
        return problem(request, error, "The job was not retried")
    return back_to("/console/jobs", "Job queued again.")
