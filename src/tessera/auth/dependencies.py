"""Turn a request's credential into a Principal; every project route depends on this."""

from typing import Annotated

import jwt
from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from tessera.auth.api_keys import UsageRecorder, principal_for_api_key
from tessera.auth.principal import Principal
from tessera.auth.tokens import ExternalIssuer, TokenIssuer
from tessera.config import Settings
from tessera.crypto import SecretBox
from tessera.db import SessionDep
from tessera.errors import CredentialInvalid, CredentialMissing, WritePermissionRequired


class Authenticator:
    """Per-process credential state: hash key, token issuer, external issuer, usage batching."""

    def __init__(self, settings: Settings, box: SecretBox) -> None:
        self.hash_key = settings.hash_key.get_secret_value().encode()
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


api_key_scheme = APIKeyHeader(
    name="x-api-key",
    scheme_name="ApiKey",
    description="An API key issued with `tessera apikey create` (or `tessera project create`).",
    auto_error=False,
)
bearer_scheme = HTTPBearer(
    scheme_name="BearerJWT",
    bearerFormat="JWT",
    description=(
        "A JWT from `POST /v1/auth/token` (client credentials) or from the configured external "
        "OIDC issuer, for a subject bound with `tessera identity bind`."
    ),
    auto_error=False,
)


async def authenticate(
    request: Request,
    session: SessionDep,
    api_key: Annotated[str | None, Security(api_key_scheme)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
) -> Principal:
    """Resolve the credential: API key first, else bearer token. 401 when neither is valid."""
    auth: Authenticator = request.app.state.authenticator
    if api_key:
        principal, key_id = await principal_for_api_key(session, api_key, hash_key=auth.hash_key)
        auth.usage.touch(key_id)
        return principal
    if bearer is None:
        if request.headers.get("authorization"):
            raise CredentialInvalid("the Authorization header must be 'Bearer <token>'")
        raise CredentialMissing
    token = bearer.credentials
    try:
        header = jwt.get_unverified_header(token)
        issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
    except jwt.PyJWTError as exc:
        raise CredentialInvalid from exc
    if issuer == auth.issuer.settings.jwt_issuer:
        return await auth.issuer.verify(session, token, header.get("kid"))
    if auth.external is not None and issuer == auth.external.issuer:
        return await auth.external.verify(session, token, header.get("kid"))
    raise CredentialInvalid


async def require_write(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    if not principal.can_write:
        raise WritePermissionRequired
    return principal


Reader = Annotated[Principal, Depends(authenticate)]
Writer = Annotated[Principal, Depends(require_write)]
