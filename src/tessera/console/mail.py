"""A project's email: its newest mails with their status and last error (never their bodies,
which hold ticket links), the project's ticket email switched on or off, and its printable
tickets (their paper, their PDFs in ticket emails)."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from tessera.config import SettingsDep
from tessera.console.forms import PrintingForm, TicketEmailsForm
from tessera.console.web import PosterDep, UserDep, back_to, page, project_of
from tessera.db import DatabaseDep
from tessera.mail import repository
from tessera.projects import service as projects

router = APIRouter(prefix="/console", include_in_schema=False)

NEWEST = 100


@router.get("/projects/{project_id}/mail", response_class=HTMLResponse)
async def mail_page(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: UserDep,
    project_id: uuid.UUID,
) -> Response:
    project = await project_of(database, user, project_id)
    mails = await database.read(repository.recent_mails, project.id, limit=NEWEST)
    return page(
        request,
        "mail.html",
        {
            "project": project,
            "mails": mails,
            "newest": NEWEST,
            "mail_configured": settings.smtp_url is not None,
        },
    )


@router.post("/projects/{project_id}/ticket-emails", response_class=HTMLResponse)
async def set_ticket_emails(
    database: DatabaseDep,
    user: PosterDep,
    project_id: uuid.UUID,
    form: Annotated[TicketEmailsForm, Form()],
) -> Response:
    project = await project_of(database, user, project_id)
    on = form.ticket_emails == "true"
    await projects.set_project_rules(database, project_id=project.id, ticket_emails=on)
    notice = "Ticket email is on." if on else "Ticket email is off."
    return back_to(f"/console/projects/{project.id}", notice)


@router.post("/projects/{project_id}/printing", response_class=HTMLResponse)
async def set_printing(
    database: DatabaseDep,
    user: PosterDep,
    project_id: uuid.UUID,
    form: Annotated[PrintingForm, Form()],
) -> Response:
    project = await project_of(database, user, project_id)
    attach = None if form.ticket_pdf_in_emails is None else form.ticket_pdf_in_emails == "true"
    changed = await projects.set_project_rules(
        database, project_id=project.id, paper=form.paper, ticket_pdf_in_emails=attach
    )
    paper = "Letter" if changed.paper == "letter" else "A4"
    attached = "attached to" if changed.ticket_pdf_in_emails else "not attached to"
    notice = f"Tickets print on {paper}; their PDFs are {attached} ticket emails."
    return back_to(f"/console/projects/{project.id}", notice)
