"""The /v1 API: every domain router (included into the app by `include_v1`), the open version
endpoint, and what the generated OpenAPI is completed with."""

from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tessera import API_VERSION, __build__
from tessera.auth.dependencies import SECURITY_SCHEMES
from tessera.changes.router import router as changes_router
from tessera.checkins.router import router as checkins_router
from tessera.claims.router import router as claim_links_router
from tessera.errors import responses
from tessera.events.router import router as events_router
from tessera.legacy.router import router as legacy_router
from tessera.orders.router import router as orders_router
from tessera.products.router import holdings_router
from tessera.products.router import router as products_router
from tessera.projects.router import router as projects_router
from tessera.reconciliation.router import router as reconciliation_router
from tessera.schemas import SnakeModel, known_query_only
from tessera.seats.router import holds_router as seat_holds_router
from tessera.seats.router import router as seats_router
from tessera.tickets.router import router as tickets_router
from tessera.users.router import router as users_router
from tessera.waiting.router import router as waiting_list_router
from tessera.wallets.router import balances_router
from tessera.wallets.router import router as wallets_router
from tessera.webhooks.router import router as webhooks_router

# Routes that answer without a credential; tests/test_security.py walks app.routes against it.
OPEN_ROUTES = frozenset(
    {
        # Where a person who types the server's address lands: what to read next.
        ("GET", "/"),
        ("GET", "/v1"),
        ("GET", "/v1/version"),
        ("GET", "/v1/health/ready"),
        ("POST", "/v1/auth/token"),
        ("GET", "/.well-known/jwks.json"),
        # Prometheus: its own token (TESSERA_METRICS_TOKEN) or loopback only (tessera.metrics).
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", "/docs/oauth2-redirect"),
        # Claim links: the token in the path is the credential.
        ("GET", "/v1/claims/{token}"),
        ("POST", "/v1/claims/{token}"),
        ("GET", "/claim/{token}"),
        ("POST", "/claim/{token}"),
        # A ticket's page, its event's calendar file, its PDF and its wallets' passes: the token
        # in the path is the credential.
        ("GET", "/tickets/{token}"),
        ("GET", "/tickets/{token}/event.ics"),
        ("GET", "/tickets/{token}/ticket.pdf"),
        ("GET", "/tickets/{token}/pass.pkpass"),
        ("GET", "/tickets/{token}/google-wallet"),
        # The PassKit web service: a pass's token (Authorization: ApplePass) is the credential
        # where one is needed (tessera.passes.router); Apple's protocol asks none of the
        # changed-passes list and the log.
        ("POST", "/passkit/v1/devices/{device}/registrations/{pass_type}/{serial}"),
        ("DELETE", "/passkit/v1/devices/{device}/registrations/{pass_type}/{serial}"),
        ("GET", "/passkit/v1/devices/{device}/registrations/{pass_type}"),
        ("GET", "/passkit/v1/passes/{pass_type}/{serial}"),
        ("POST", "/passkit/v1/log"),
        # The door scanner's page and service worker: a shell, its data comes from the API.
        ("GET", "/scan"),
        ("GET", "/scan/sw.js"),
        # The console's sign-in; its other pages want a console session (tessera.console).
        ("GET", "/console/login"),
        ("POST", "/console/login"),
        ("POST", "/console/login/key"),
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


class ServiceIndex(SnakeModel):
    name: str
    docs: str
    console: str
    version: str


# A pointer for people who type the server's address; documented, so that a 405 names GET.
index_router = APIRouter(tags=["version"], dependencies=[Depends(known_query_only)])


@index_router.get("/", response_model=ServiceIndex, operation_id="get_index")
@index_router.get("/v1", response_model=ServiceIndex, operation_id="get_v1_index")
async def get_index() -> ServiceIndex:
    """The server's front door: the API's reference, the operator console and the version."""
    return ServiceIndex(name="Tessera", docs="/docs", console="/console", version="/v1/version")


# Routes whose answer to a GET without a query string never changes while the process runs.
CONSTANT_ROUTES = frozenset({"/v1/version"})


class ConstantAnswers:
    """The answer of a constant route (``CONSTANT_ROUTES``: ``GET /v1/version``, the health
    check), kept after the route has given it once, and sent again to the same request.

    Load balancers and orchestrators call the health check many times a second, and routing
    plus the route's handling cost several times the answer. The route stays the one place the
    answer is made: the first such request goes through it, and its answer (a 200: status,
    headers, body, and the endpoint that routing chose, for the metrics' label) is what the
    next ones get. Any other request to the path (a query string, another method) is routed as
    usual. It sits inside ``RequestContextMiddleware``, so every answer carries its own
    request id.
    """

    def __init__(self, app: ASGIApp, paths: frozenset[str] = CONSTANT_ROUTES) -> None:
        self.app = app
        self.paths = paths
        self.answers: dict[str, tuple[Message, Message, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "GET"
            or scope["query_string"]
            or scope["path"] not in self.paths
        ):
            await self.app(scope, receive, send)
            return
        kept = self.answers.get(scope["path"])
        if kept is not None:
            start, body, scope["endpoint"] = kept
            await send({**start})
            await send({**body})
            return
        sent: list[Message] = []

        async def keep(message: Message) -> None:
            sent.append({**message})  # as the route sent it: the request's own id comes after
            await send(message)

        await self.app(scope, receive, keep)
        if (
            len(sent) == 2
            and sent[0]["type"] == "http.response.start"
            and sent[0]["status"] == 200
            and not sent[1].get("more_body", False)
        ):
            self.answers[scope["path"]] = (sent[0], sent[1], scope.get("endpoint"))


def include_v1(app: FastAPI) -> None:
    """Every project route, under /v1 (``ProjectRoute``: each checks the credential, its rate
    limit, then unknown query parameters first). The routes are added to the app's own
    list, not included as routers: FastAPI routes an included router's requests by trying its
    routes twice, and tessera.web.routing indexes the app's list."""
    domains = (
        wallets_router,  # before users: /users/wallets/... are not /users/{...} lookups
        users_router,
        balances_router,  # the user's wallets', and the items the user holds
        holdings_router,
        events_router,
        seats_router,
        seat_holds_router,
        products_router,
        reconciliation_router,
        tickets_router,
        checkins_router,
        claim_links_router,
        waiting_list_router,
        orders_router,
        projects_router,
        changes_router,
        webhooks_router,
    )
    for domain in (legacy_router, *domains):  # legacy first: its concrete paths win
        app.router.routes.extend(domain.routes)


def document(app: FastAPI, *, rate_limits: bool = False, webhook_url: str | None = None) -> None:
    """Complete the generated OpenAPI with what no route declares (FastAPI's documented way to
    extend it: its ``openapi`` method replaced by one that completes what it generates).

    - The two credential schemes (each project operation names them, ``ProjectRoute``; the
      Idempotency-Key header is declared by ``IdempotentRoute``).
    - No NUL character in any text (tessera.schemas, tessera.web.middleware): a pattern on every
      string that has no pattern, format or fixed values of its own.
    - Links from what creates an object to what reads or uses it (``LINKS``), so that a client
      generator, or a stateful fuzzer, can follow them.
    - The 429 of every project operation while ``rate_limits`` are set.
    - The pattern of a webhook's ``url`` (``webhook_url``), which follows the settings (http
      is allowed with private addresses).
    """
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()  # which keeps it as app.openapi_schema
        schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
        if rate_limits:
            for path, operations in schema["paths"].items():
                for method, operation in operations.items():
                    if (method.upper(), path) not in OPEN_ROUTES:
                        _answers(operation, {"429": responses(429)[429]["description"]})
        if webhook_url is not None:
            _webhook_urls(schema, webhook_url)
        _refuse_nul(schema)
        _link(schema)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _answers(operation: dict[str, Any], descriptions: dict[str, str]) -> None:
    """Document error answers (``ErrorMessage``) the operation does not document yet."""
    for status, description in descriptions.items():
        if status not in operation["responses"]:
            operation["responses"][status] = {
                "description": description,
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorMessage"}}
                },
            }


def _webhook_urls(schema: dict[str, Any], pattern: str) -> None:
    for name in ("WebhookCreate", "WebhookUpdate"):
        url = schema["components"]["schemas"][name]["properties"]["url"]
        for branch in url.get("anyOf", [url]):
            if branch.get("type") == "string":
                branch["pattern"] = pattern


NO_NUL = "^[^\\u0000]*$"
_SPECIFIC = frozenset({"pattern", "format", "enum", "const"})


def _refuse_nul(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "string" and not _SPECIFIC & node.keys():
            node["pattern"] = NO_NUL
        for value in node.values():
            _refuse_nul(value)
    elif isinstance(node, list):
        for value in node:
            _refuse_nul(value)


# (from method, from path, link name, to method, to path, parameters, request body): what a
# successful answer of the first operation lets a client call next.
_USER = "$response.body#/users/0/id"
_ITEM = "$response.body#/items/0/id"
LINKS = [
    ("POST", "/v1/users/create", "profile", "POST", "/v1/users/profile", {}, {"id": _USER}),
    ("POST", "/v1/users/create", "activate", "POST", "/v1/users/activate", {}, {"id": _USER}),
    (
        "POST",
        "/v1/users/create",
        "reputation",
        "POST",
        "/v1/users/reputation",
        {},
        {"id": _USER, "delta": 1, "reason": "linked"},
    ),
    (
        "POST",
        "/v1/events/create",
        "get",
        "GET",
        "/v1/events/{IdOrReferenceId}",
        {"IdOrReferenceId": "$response.body#/id"},
        None,
    ),
    (
        "POST",
        "/v1/events/create",
        "attendees",
        "GET",
        "/v1/events/{event_id}/attendees",
        {"event_id": "$response.body#/id"},
        None,
    ),
    ("POST", "/v1/products", "get", "GET", "/v1/products/{id}", {"id": "$response.body#/id"}, None),
    (
        "POST",
        "/v1/products",
        "update",
        "PATCH",
        "/v1/products/{id}",
        {"id": "$response.body#/id"},
        None,
    ),
    (
        "POST",
        "/v1/products",
        "items",
        "POST",
        "/v1/products/{id}/items",
        {"id": "$response.body#/id"},
        None,
    ),
    (
        "POST",
        "/v1/products",
        "sales",
        "GET",
        "/v1/products/{id}/sales",
        {"id": "$response.body#/id"},
        None,
    ),
    (
        "POST",
        "/v1/products/{id}/items",
        "redeem",
        "POST",
        "/v1/products/{id}/items/redeem",
        {"id": "$request.path.id"},
        {"product_item_id": _ITEM},
    ),
    (
        "POST",
        "/v1/products/{id}/items",
        "transfer",
        "POST",
        "/v1/products/{id}/transfer",
        {"id": "$request.path.id"},
        {"product_item_id": _ITEM, "sender_user_id": "$response.body#/items/0/user/id"},
    ),
    (
        "POST",
        "/v1/products/{id}/items",
        "items",
        "GET",
        "/v1/products/{id}/items",
        {"id": "$request.path.id", "owner_id": "$response.body#/items/0/user/id"},
        None,
    ),
    (
        "POST",
        "/v1/products/{id}/items",
        "transfers",
        "GET",
        "/v1/products/{id}/items/{item_id}/transfers",
        {"id": "$request.path.id", "item_id": _ITEM},
        None,
    ),
    ("POST", "/v1/users/create", "items", "POST", "/v1/users/items", {}, {"id": _USER}),
    (
        "POST",
        "/v1/users/create",
        "reputation_history",
        "POST",
        "/v1/users/reputation/history",
        {},
        {"id": _USER},
    ),
    (
        "POST",
        "/v1/orders",
        "list",
        "GET",
        "/v1/orders",
        {"user_id": "$response.body#/user_id"},
        None,
    ),
    (
        "POST",
        "/v1/products",
        "claim_links",
        "POST",
        "/v1/products/{id}/claim-links",
        {"id": "$response.body#/id"},
        None,
    ),
    (
        "POST",
        "/v1/products/{id}/claim-links",
        "get",
        "GET",
        "/v1/products/{id}/claim-links/{link_id}",
        {"id": "$request.path.id", "link_id": "$response.body#/id"},
        None,
    ),
    (
        "POST",
        "/v1/products/{id}/claim-links",
        "view",
        "GET",
        "/v1/claims/{token}",
        {"token": "$response.body#/token"},
        None,
    ),
    (
        "POST",
        "/v1/products/{id}/claim-links",
        "claim",
        "POST",
        "/v1/claims/{token}",
        {"token": "$response.body#/token"},
        None,
    ),
    ("POST", "/v1/orders", "get", "GET", "/v1/orders/{id}", {"id": "$response.body#/id"}, None),
    (
        "POST",
        "/v1/orders",
        "complete",
        "POST",
        "/v1/orders/{id}/complete",
        {"id": "$response.body#/id"},
        None,
    ),
    (
        "POST",
        "/v1/orders",
        "cancel",
        "POST",
        "/v1/orders/{id}/cancel",
        {"id": "$response.body#/id"},
        None,
    ),
]


def _link(schema: dict[str, Any]) -> None:
    paths = schema["paths"]
    for method, path, name, to_method, to_path, parameters, body in LINKS:
        operation = paths[path][method.lower()]
        success = next(status for status in operation["responses"] if status.startswith("2"))
        link: dict[str, Any] = {"operationId": paths[to_path][to_method.lower()]["operationId"]}
        if parameters:
            link["parameters"] = parameters
        if body is not None:
            link["requestBody"] = body
        operation["responses"][success].setdefault("links", {})[name] = link
