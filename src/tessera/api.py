"""The /v1 router: every domain router, plus the open version endpoint."""

from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tessera import API_VERSION, __build__
from tessera.auth.dependencies import SECURITY_SCHEMES, authenticate
from tessera.events.router import router as events_router
from tessera.orders.router import router as orders_router
from tessera.products.router import router as products_router
from tessera.projects.router import router as projects_router
from tessera.schemas import SnakeModel, known_query_only
from tessera.users.router import router as users_router

# Routes that answer without a credential; tests/test_security.py walks app.routes against it.
OPEN_ROUTES = frozenset(
    {
        ("GET", "/v1/version"),
        ("POST", "/v1/auth/token"),
        ("GET", "/.well-known/jwks.json"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", "/docs/oauth2-redirect"),
    }
)


class VersionRead(SnakeModel):
    version: str


version_router = APIRouter(prefix="/v1", tags=["version"], dependencies=[Depends(known_query_only)])


@version_router.get("/version", response_model=VersionRead)
async def get_version(response: Response) -> VersionRead:
    """API version implemented by this server; also a health check (no credential)."""
    response.headers["X-Tessera-Build"] = __build__
    return VersionRead(version=API_VERSION)


class VersionAnswer:
    """``GET /v1/version`` without a query string, answered before FastAPI's routing.

    It is the health check: load balancers and orchestrators call it many times a second, and
    routing plus dependency solving cost several times the answer. The route above stays the
    contract (OpenAPI, and every other request to the path, e.g. one with a query parameter);
    the answer is the same model's dump with the same headers, built once. It sits inside
    ``RequestContextMiddleware``, so it carries the request id like every response.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.body = VersionRead(version=API_VERSION).model_dump_json().encode()
        self.headers = [
            (b"content-length", str(len(self.body)).encode()),
            (b"content-type", b"application/json"),
            (b"x-tessera-build", __build__.encode()),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == "/v1/version"
            and scope["method"] == "GET"
            and not scope["query_string"]
        ):
            await send({"type": "http.response.start", "status": 200, "headers": self.headers})
            await send({"type": "http.response.body", "body": self.body})
            return
        await self.app(scope, receive, send)


# Every project route authenticates at router level; routes add Writer where they change state.
# Unknown query parameters are refused after the credential is checked (401 comes first).
v1 = APIRouter(prefix="/v1", dependencies=[Depends(authenticate), Depends(known_query_only)])
for domain in (users_router, events_router, products_router, orders_router, projects_router):
    v1.include_router(domain)


def document_security(app: FastAPI) -> None:
    """Show both credential schemes on every operation but the open ones.

    ``authenticate`` reads the headers itself rather than through FastAPI's security
    dependencies (see tessera.auth.dependencies), so the schema gets them here, once.
    """
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()  # which keeps it as app.openapi_schema
        schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
        for path, operations in schema["paths"].items():
            for method, operation in operations.items():
                if (method.upper(), path) not in OPEN_ROUTES:
                    operation["security"] = [{name: []} for name in SECURITY_SCHEMES]
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
