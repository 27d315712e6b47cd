"""Turn a request's credential into a Principal; every project route depends on this.

A credential that checked out is remembered for ``credential_cache_seconds`` (at most 2 s, and
never past its own expiry), by the keyed hash of the whole credential: a request with a known
credential makes no query. So a key revoked or expired in the database is refused by every
process within that time. Refusals are never remembered. While a credential is being checked,
the requests that bring it too wait for that one check (when an entry expires under load, one
query refreshes it, not one per request in flight).
"""

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import jwt
from fastapi import APIRouter, Depends, Request, Response

from tessera.auth.principal import Principal
from tessera.auth.rate_limits import RateLimiter
from tessera.auth.service import API_KEY_START, UsageRecorder, access_for_api_key
from tessera.auth.tokens import ExternalIssuer, TokenIssuer
from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.db import Database, database_of, is_read_only, writes
from tessera.errors import (
    AppError,
    CredentialInvalid,
    CredentialMissing,
    DoorOnly,
    WritePermissionRequired,
)
from tessera.idempotency.router import WRITE_METHODS, IdempotentRoute
from tessera.idempotency.schemas import KeyScope
from tessera.models.base import utcnow
from tessera.schemas import refuse_unknown_query
from tessera.ticket_keys.service import Signers
from tessera.toolkit.crypto import SecretBox, keyed_hash
from tessera.web.handlers import PlainRoute

CACHE_MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class _Known:
    principal: Principal
    key_id: uuid.UUID | None  # API keys record their last use
    until: float  # time.monotonic()


class CredentialCache:
    """Credentials that checked out in the last ``ttl`` seconds, by keyed hash."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._known: dict[str, _Known] = {}
        self._checking: dict[str, asyncio.Future[_Known]] = {}

    def clear(self) -> None:
        self._known.clear()

    def get(self, digest: str) -> _Known | None:
        known = self._known.get(digest)
        if known is None:
            return None
        if known.until <= time.monotonic():
            del self._known[digest]
            return None
        return known

    async def check_once(self, digest: str, check: Callable[[], Awaitable[_Known]]) -> _Known:
        """``check()``, or the result of the one already running for ``digest`` (its refusal
        too, which is not kept after it)."""
        running = self._checking.get(digest)
        if running is None:
            running = self._checking[digest] = asyncio.ensure_future(check())
            running.add_done_callback(lambda _: self._checking.pop(digest, None))
        # Shielded: a request that goes away does not cancel the check the others wait for.
        return await asyncio.shield(running)

    def put(
        self,
        digest: str,
        principal: Principal,
        *,
        key_id: uuid.UUID | None = None,
        expires_at: datetime | None = None,
    ) -> _Known:
        lifetime = self.ttl
        if expires_at is not None:
            lifetime = min(lifetime, (expires_at - utcnow()).total_seconds())
        known = _Known(principal, key_id, time.monotonic() + lifetime)
        if lifetime > 0:
            if len(self._known) >= CACHE_MAX_ENTRIES:
                self.clear()  # many distinct credentials at once: start again
            self._known[digest] = known
        return known


class Authenticator:
    """Per-process credential state: hash key, token issuers, the cache, usage batching."""

    def __init__(self, settings: Settings, box: SecretBox) -> None:
        self.hash_key = settings.hash_key_bytes
        self.cache = CredentialCache(settings.credential_cache_seconds)
        self.issuer = TokenIssuer(settings, box)
        self.external = (
            ExternalIssuer(
                issuer=settings.oidc_issuer,
                audience=settings.oidc_audience or "",
                jwks_url=settings.oidc_jwks_url or "",
                cache_seconds=settings.oidc_jwks_cache_seconds,
            )
            if settings.oidc_issuer
            else None
        )
        self.usage = UsageRecorder()


async def authenticator_of(request: Request) -> Authenticator:
    authenticator: Authenticator = request.app.state.authenticator
    return authenticator


AuthenticatorDep = Annotated[Authenticator, Depends(authenticator_of)]


# The two ways to send a credential, as OpenAPI security schemes. authenticate() reads the
# headers itself: FastAPI's security dependencies would add two dependencies to solve on every
# request for what is two header lookups. tessera.api documents them on every project route.
SECURITY_SCHEMES = {
    "ApiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "x-api-key",
        "description": (
            "An API key issued with `tessera apikey create` (or `tessera project create`)."
        ),
    },
    "BearerApiKey": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "API key (tsk_...)",
        "description": (
            "The same API key sent as `Authorization: Bearer tsk_...`, as Mufi's guide shows: a "
            "bearer credential that starts with `tsk_` is an API key, with the same checks."
        ),
    },
    "BearerJWT": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": (
            "A JWT from `POST /v1/auth/token` (client credentials) or from the configured external "
            "OIDC issuer, for a subject bound with `tessera identity bind`."
        ),
    },
}


async def authenticate(request: Request) -> Principal:
    """What every project route checks first, in this order: the credential (401), its rate
    limit when one is set (429, ``auth.rate_limits``), then the query string (400 for a
    parameter the route does not declare). One dependency for the three: each dependency
    FastAPI solves costs every request.

    A request is checked once: an Idempotency-Key's scope (``ProjectRoute``) is found before
    the route's dependencies run, and the rate limit counts the request once.

    The credential is the ``x-api-key`` header, else the bearer credential: an API key when it
    starts with ``tsk_`` and a JWT otherwise."""
    state = request.scope.setdefault("state", {})
    checked: Principal | None = state.get("principal")
    if checked is not None:
        return checked
    principal = await _credential(request)
    limiter: RateLimiter = request.app.state.rate_limiter
    if limiter.on:
        await limiter.admit(database_of(request.app), principal, write=writes(request))
    refuse_unknown_query(request)
    state["principal"] = principal
    return principal


async def _credential(request: Request) -> Principal:
    auth: Authenticator = request.app.state.authenticator
    headers = request.headers
    if api_key := headers.get("x-api-key"):
        credential, is_api_key = api_key, True
    elif authorization := headers.get("authorization"):
        scheme, _, token = authorization.partition(" ")
        credential = token.strip()
        if scheme.lower() != "bearer" or not credential:
            raise CredentialInvalid("the Authorization header must be 'Bearer <token>'")
        is_api_key = credential.startswith(API_KEY_START)
    else:
        raise CredentialMissing
    digest = keyed_hash(auth.hash_key, credential)
    known = auth.cache.get(digest)
    if known is None:
        database = database_of(request.app)

        async def check() -> _Known:
            return await _check(auth, database, credential, digest, is_api_key=is_api_key)

        known = await auth.cache.check_once(digest, check)
    if known.key_id is not None:
        auth.usage.touch(known.key_id)
    # For the access log (tessera.web.middleware), which runs outside the dependencies.
    request.scope.setdefault("state", {})["project_id"] = known.principal.project_id
    return known.principal


async def _check(
    auth: Authenticator, database: Database, credential: str, digest: str, *, is_api_key: bool
) -> _Known:
    """Check a credential against the database or its issuer, and remember it. (No connection
    is held while an external issuer's keys are fetched.)"""
    if is_api_key:
        access = await database.read(access_for_api_key, credential, digest=digest)
        return auth.cache.put(
            digest, access.principal, key_id=access.key_id, expires_at=access.expires_at
        )
    try:
        header = jwt.get_unverified_header(credential)
        claims = jwt.decode(credential, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise CredentialInvalid from exc
    issuer, kid = claims.get("iss"), header.get("kid")
    if issuer == auth.issuer.settings.jwt_issuer:
        principal = await auth.issuer.verify(database, credential, kid)
    elif auth.external is not None and issuer == auth.external.issuer:
        principal = await auth.external.verify(database, credential, kid)
    else:
        raise CredentialInvalid
    # Both issuers require ``exp``, and verify() has checked it.
    return auth.cache.put(
        digest, principal, expires_at=datetime.fromtimestamp(int(claims["exp"]), UTC)
    )


@dataclass(frozen=True, slots=True)
class Caller:
    """Whom a project route serves (the credential's principal) and what its use-cases run
    with. ``ProjectRoute`` lets a request in and leaves it with the request; an endpoint names
    it as a parameter, ``caller: CallerDep``."""

    principal: Principal
    database: Database
    settings: Settings
    box: SecretBox
    chains: Chains
    signers: Signers


CALLER = "tessera.caller"


async def current_caller(request: Request) -> Caller:
    """The caller ``admit`` let in. A dependency of the request alone, so that a project
    route stays plain (``tessera.web.handlers``) and its OpenAPI gains no parameter."""
    caller: Caller = request.scope["state"][CALLER]
    return caller


CallerDep = Annotated[Caller, Depends(current_caller)]
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


EndpointT = TypeVar("EndpointT", bound=Callable[..., Any])
# The door's routes: a check-in key may call them (and only them), writes included.
AT_THE_DOOR: set[Callable[..., Any]] = set()


def at_the_door(endpoint: EndpointT) -> EndpointT:
    """Mark a route a check-in key may call (scan, annul, upload scans, the sync)."""
    AT_THE_DOOR.add(endpoint)
    return endpoint


async def admit(request: Request, *, write: bool, door: bool = False) -> None:
    """What every project route checks before anything else (``authenticate``), and 403 for
    a read credential on a write, or a check-in key off the door's routes; the caller then
    waits in the request's state."""
    principal = await authenticate(request)
    if principal.door_only:
        if not door:
            raise DoorOnly
    elif write and not principal.can_write:
        raise WritePermissionRequired
    state = request.app.state
    database = database_of(request.app)
    caller = Caller(principal, database, state.settings, state.box, state.chains, state.signers)
    request.scope["state"][CALLER] = caller


class ProjectRoute(IdempotentRoute, PlainRoute):
    """A project route. Its handler lets a request in only once ``admit`` has: the credential
    (401), its rate limit (429), the query string (400), and for a change (a POST, PUT, PATCH
    or DELETE not marked ``reads_only``) a write credential (403), all before the body is
    read or validated; no endpoint can forget it. tests/test_security.py proves that every
    route but the open ones refuses a request without a credential. Its OpenAPI operation
    names both ways to send one, and its writes keep their Idempotency-Keys within the
    credential's project."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **options: Any) -> None:
        security: dict[str, Any] = {"security": [{name: []} for name in SECURITY_SCHEMES]}
        options["openapi_extra"] = security | (options.get("openapi_extra") or {})
        # Known before FastAPI's __init__, which builds the handler.
        self.reads_only = is_read_only(endpoint)
        self.at_the_door = endpoint in AT_THE_DOOR
        super().__init__(path, endpoint, **options)

    def get_route_handler(self) -> Handler:
        return self.admitting(super().get_route_handler())

    def admitting(self, handler: Handler) -> Handler:
        """``handler`` behind ``admit``."""
        reads_only, door = self.reads_only, self.at_the_door

        async def admitted(request: Request) -> Response:
            write = request.method in WRITE_METHODS and not reads_only
            await admit(request, write=write, door=door)
            return await handler(request)

        return admitted

    async def key_scope(self, request: Request) -> KeyScope | None:
        try:
            principal = await authenticate(request)
        except AppError:  # refused by the route's own check, as usual
            return None
        return KeyScope(principal.project_id) if principal.can_write else None


def project_router(prefix: str, *, tags: list[str]) -> APIRouter:
    """A router of project routes under ``/v1{prefix}`` (``ProjectRoute``)."""
    return APIRouter(prefix=f"/v1{prefix}", tags=list(tags), route_class=ProjectRoute)
