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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

import jwt
from fastapi import Depends, Request

from tessera.auth.principal import Principal
from tessera.auth.rate_limits import RateLimiter, SignInLimiter
from tessera.auth.service import API_KEY_START, UsageRecorder, access_for_api_key
from tessera.auth.tokens import ExternalIssuer, TokenIssuer
from tessera.config import Settings
from tessera.db import Database, database_of
from tessera.errors import (
    CredentialInvalid,
    CredentialMissing,
    DoorOnly,
    WritePermissionRequired,
)
from tessera.models.base import utcnow
from tessera.schemas import refuse_unknown_query
from tessera.toolkit.crypto import SecretBox, keyed_hash

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


async def authenticate(request: Request, *, write: bool) -> Principal:
    """What every project route checks first, in this order: the credential (401), its rate
    limit when one is set (429, ``auth.rate_limits``), then the query string (400 for a
    parameter the route does not declare). One dependency for the three: each dependency
    FastAPI solves costs every request.

    A request is checked once: an Idempotency-Key's scope (``ProjectRoute``) is found before
    the route's dependencies run, and the rate limit counts the request once, as a write when
    ``write`` (the route's ``Access``).

    The credential is the ``x-api-key`` header, else the bearer credential: an API key when it
    starts with ``tsk_`` and a JWT otherwise."""
    state = request.scope.setdefault("state", {})
    checked: Principal | None = state.get("principal")
    if checked is not None:
        return checked
    principal = await _credential(request)
    limiter: RateLimiter = request.app.state.rate_limiter
    if limiter.on:
        await limiter.admit(database_of(request.app), principal, write=write)
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
class Access:
    """What a project route lets in: the dependency behind ``ReadAccess``, ``WriteAccess``,
    ``DoorReadAccess`` and ``DoorWriteAccess``, the one parameter of every project endpoint that
    says who may call it. It answers the credential's ``Principal`` once ``authenticate`` has
    let the request in (401, 429, 400), or refuses it: 403 for a read credential on a route
    that ``writes``, and for a check-in key on a route that is not the ``door``'s.

    ``writes`` is also what the rate limits count the request as: a lookup sent as a POST
    (``ReadAccess``) is a read. ``tessera.web.routes.ProjectRoute`` reads the access from the
    endpoint's signature and checks it before the body is read."""

    writes: bool
    door: bool

    async def __call__(self, request: Request) -> Principal:
        principal = await authenticate(request, write=self.writes)
        if principal.door_only:
            if not self.door:
                raise DoorOnly
        elif self.writes and not principal.can_write:
            raise WritePermissionRequired
        return principal


# Any credential of the project but a check-in key.
ReadAccess = Annotated[Principal, Depends(Access(writes=False, door=False))]
# A write credential (an API key or token with write permission).
WriteAccess = Annotated[Principal, Depends(Access(writes=True, door=False))]
# The door's reads (its events, the sync): a check-in key, or any credential of the project.
DoorReadAccess = Annotated[Principal, Depends(Access(writes=False, door=True))]
# The door's scans (scan, annul, upload): a check-in key, or a write credential.
DoorWriteAccess = Annotated[Principal, Depends(Access(writes=True, door=True))]


async def sign_in_limiter(request: Request) -> SignInLimiter:
    limiter: SignInLimiter = request.app.state.console_limiter
    return limiter


SignInLimiterDep = Annotated[SignInLimiter, Depends(sign_in_limiter)]
