"""How an exception becomes an answer: ``AppError``'s own status and body (tessera.errors),
a request's validation errors as ``{"errors": [...]}``, and the framework's own refusals (a
body it cannot read, an unknown route, a method the path does not answer) in the same shapes.
"""

import difflib
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from tessera.errors import AppError, DatabaseUnavailable, validation_messages

log = logging.getLogger("tessera.errors")


def install_error_handlers(app: FastAPI) -> None:
    templates: list[str] = []

    @app.exception_handler(AppError)
    async def _app_error(request: Request, exc: AppError) -> JSONResponse:
        if isinstance(exc, DatabaseUnavailable):  # the operator's to know, and why
            log.warning("%s %s: %s (%r)", request.method, request.url.path, exc, exc.__cause__)
        return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers())

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = validation_messages(exc.errors())
        content_type = request.headers.get("content-type", "")
        whole_body = any(tuple(e.get("loc", ())) == ("body",) for e in exc.errors())
        if whole_body and "json" not in content_type:
            # FastAPI reads a body as JSON only when the request says it is JSON.
            errors = [f"body: send JSON with Content-Type: application/json (got {content_type!r})"]
        return JSONResponse({"errors": errors}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "error"
        headers = exc.headers
        if exc.status_code == 400:  # every 400 has the errors shape, whatever failed
            return JSONResponse({"errors": [unparsable_body(exc.__cause__) or message]}, 400)
        path = request.url.path
        if exc.status_code == 405:  # the router names only the first route of the path
            allowed = allowed_methods(app, path)
            headers = {"Allow": ", ".join(allowed)}
            message = (
                f"{request.method} is not allowed on {path}: it answers {' or '.join(allowed)}"
            )
        elif exc.status_code == 404 and exc.detail == "Not Found":  # routing's, or a file's
            message = f"nothing answers {request.method} {path}"
            # Gathered at the first 404 and kept: every route is added before the app serves,
            # and a scan of unknown paths should not walk them each time.
            if not templates:
                templates.extend(documented(app))
            if nearest := nearest_route(templates, path):
                message += f"; the nearest is {nearest}"
        return JSONResponse({"message": message}, status_code=exc.status_code, headers=headers)


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """The methods of the path template that ``path`` names, as the OpenAPI lists them: the
    most concrete one that matches (``/v1/events/create`` is POST, though ``GET
    /v1/events/{id}`` would take it too), as OpenAPI matches concrete paths before templated
    ones. Computed per 405, which is rare."""
    routes = [
        (r.path, r.methods or set())
        for r in iter_route_contexts(app.routes)
        if r.path and getattr(r.original_route, "include_in_schema", True)
    ]
    matching = [t for t, _ in routes if compile_path(t)[0].match(path)]
    template = min(matching, key=lambda t: t.count("{"), default=None)
    return sorted({m for t, methods in routes if t == template for m in methods})


def documented(app: FastAPI) -> list[str]:
    """The app's documented path templates."""
    return sorted(
        {
            r.path
            for r in iter_route_contexts(app.routes)
            if r.path and getattr(r.original_route, "include_in_schema", False)
        }
    )


def nearest_route(templates: list[str], path: str) -> str | None:
    """The template most like ``path`` (``/v1/product``: ``/v1/products``), if one is alike
    enough to be what the client meant."""
    close = difflib.get_close_matches(path, templates, n=1, cutoff=0.75)
    return close[0] if close else None


def unparsable_body(cause: BaseException | None) -> str | None:
    """Why the framework could not read a JSON body (it says only "error parsing the body")."""
    if isinstance(cause, UnicodeDecodeError):
        return "body: not valid UTF-8"
    if isinstance(cause, RecursionError):
        return "body: JSON nested too deeply"
    if isinstance(cause, ValueError):  # e.g. an integer of thousands of digits
        return f"body: malformed JSON: {cause}"
    return None
