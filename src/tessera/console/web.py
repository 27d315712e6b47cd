"""What every console page shares: templates, the signed-in user, CSRF, scoping, answers.

Pages are plain HTML forms (no JavaScript needed), styled by the package's stylesheet. A page
for someone not signed in redirects to the sign-in page; a project the person may not see is
404, as one that does not exist. Every POST carries the session's CSRF token (``csrf`` field),
checked before anything else; the cookie is ``SameSite=Lax`` besides.
"""

import hmac
import inspect
import ipaddress
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from tessera.config import SettingsDep
from tessera.console.service import COOKIE, SESSION_HOURS, ConsoleUser, session_of
from tessera.db import Database, DatabaseDep
from tessera.errors import AppError, InvalidInput, NotFound, validation_messages
from tessera.projects.repository import ProjectRow, read_project

PACKAGE = Path(__file__).resolve().parents[1]
templates = Jinja2Templates(directory=PACKAGE / "templates")


def _when(value: Any) -> str:
    """A time as people read it: a datetime, or Unix seconds; empty for none."""
    if value is None or value == "":
        return ""
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    return str(value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"))


templates.env.filters["when"] = _when

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


PREFIX = "/console"


class NotSignedIn(Exception):
    """Raised by ``signed_in``: the app answers with a redirect to the sign-in page."""

    def __init__(self, next_path: str) -> None:
        self.next_path = next_path


class PageNotFound(NotFound):
    message = "page not found"


class OperatorsOnly(AppError):
    status_code = 403
    message = "only an operator may do this"


class CsrfRefused(AppError):
    status_code = 403
    message = "this form is stale or was not sent by the console: reload the page and try again"


async def signed_in(request: Request, database: DatabaseDep, settings: SettingsDep) -> ConsoleUser:
    user = await session_of(
        database,
        request.cookies.get(COOKIE),
        hash_key=settings.hash_key_bytes,
    )
    if user is None:
        raise NotSignedIn(request.url.path)
    request.state.console_user = user
    return user


UserDep = Annotated[ConsoleUser, Depends(signed_in)]


async def checked(request: Request, user: UserDep) -> ConsoleUser:
    """The signed-in user of a form post whose ``csrf`` field is the session's token (403).
    Read from the parsed form (Starlette keeps it for the endpoint's own form model)."""
    sent = (await request.form()).get("csrf")
    if not isinstance(sent, str) or not hmac.compare_digest(
        sent.encode(), user.csrf_token.encode()
    ):
        raise CsrfRefused
    return user


PosterDep = Annotated[ConsoleUser, Depends(checked)]


async def project_of(database: Database, user: ConsoleUser, project_id: uuid.UUID) -> ProjectRow:
    """The project, if this person may see it (404 otherwise, as for one that does not exist)."""
    if not user.may_see(project_id):
        raise PageNotFound
    project = await database.read(read_project, project_id)
    if project is None:
        raise PageNotFound
    return project


def page(
    request: Request, name: str, context: dict[str, Any] | None = None, status: int = 200
) -> HTMLResponse:
    user = getattr(request.state, "console_user", None)
    values = {
        "user": user,
        "csrf": user.csrf_token if user else "",
        "notice": request.query_params.get("notice"),
    } | (context or {})
    return templates.TemplateResponse(
        request, f"console/{name}", values, status_code=status, headers=HEADERS
    )


def back_to(path: str, notice: str | None = None) -> RedirectResponse:
    """After a post: see the result (303), with a line saying what was done."""
    if notice is not None:
        path += f"{'&' if '?' in path else '?'}notice={quote(notice)}"
    return RedirectResponse(path, status_code=303, headers={"Cache-Control": "no-store"})


def secrets_page(
    request: Request, heading: str, secrets: list[tuple[str, str]], next_path: str
) -> HTMLResponse:
    """New credentials, shown this once (201)."""
    context = {"heading": heading, "secrets": secrets, "next": next_path}
    return page(request, "secret_shown.html", context, 201)


def problem(request: Request, error: AppError, heading: str = "That did not work") -> HTMLResponse:
    """A refusal of a use-case as a page, with its status code."""
    lines = getattr(error, "problems", None) or [error.message]
    return page(
        request,
        "problem.html",
        {"heading": heading, "lines": lines, "back": request.headers.get("referer")},
        error.status_code,
    )


def is_loopback(request: Request) -> bool:
    host = request.url.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def with_session(response: Response, request: Request, token: str) -> Response:
    """The session cookie, ``Secure`` whenever the request came over HTTPS (a loopback host
    included: behind a proxy on the same machine the client spoke HTTPS, as uvicorn learns from
    ``X-Forwarded-Proto``) and everywhere but loopback; only plain http on loopback, where a
    browser would not send a ``Secure`` cookie back, goes without."""
    response.set_cookie(
        COOKIE,
        token,
        max_age=SESSION_HOURS * 3600,
        path="/console",
        httponly=True,
        secure=request.url.scheme == "https" or not is_loopback(request),
        samesite="lax",
    )
    return response


def without_session(response: Response) -> Response:
    response.delete_cookie(COOKIE, path="/console")
    return response


def install(app: FastAPI) -> None:
    """The console's answer to a page asked for without a session, and refusals as pages:
    under /console an ``AppError`` (or a form that does not validate) is a page with its status
    code, not the API's JSON, so pages just raise."""
    api_error = app.exception_handlers[AppError]
    api_invalid = app.exception_handlers[RequestValidationError]

    async def app_error(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith(PREFIX) and isinstance(exc, AppError):
            response = problem(request, exc)
            response.headers.update(exc.headers() or {})
            return response
        answer = api_error(request, exc)
        return await answer if inspect.isawaitable(answer) else answer

    async def invalid(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith(PREFIX) and isinstance(exc, RequestValidationError):
            lines = validation_messages(exc.errors())
            return problem(request, InvalidInput(*lines), "Please check the form")
        answer = api_invalid(request, exc)
        return await answer if inspect.isawaitable(answer) else answer

    app.add_exception_handler(AppError, app_error)
    app.add_exception_handler(RequestValidationError, invalid)

    @app.exception_handler(NotSignedIn)
    async def _to_sign_in(request: Request, exc: NotSignedIn) -> Response:
        if request.method != "GET":
            return RedirectResponse("/console/login", status_code=303)
        return RedirectResponse(f"/console/login?next={quote(exc.next_path)}", status_code=303)
