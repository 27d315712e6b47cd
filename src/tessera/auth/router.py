"""Open routes of the token issuer: the token exchange and the public keys."""

import json
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from tessera.auth.dependencies import AuthenticatorDep
from tessera.auth.schemas import Jwks, TokenRequest, TokenResponse
from tessera.db import DatabaseDep
from tessera.errors import responses

router = APIRouter(tags=["auth"])


async def token_form(request: Request) -> TokenRequest:
    """Client credentials as an OAuth2 form (RFC 6749) or as a JSON object."""
    raw = await request.body()
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        data: object = dict(parse_qsl(raw.decode("utf-8", "replace")))
    else:
        try:
            data = json.loads(raw or b"{}")
        except (ValueError, RecursionError):  # RecursionError: nested thousands deep
            raise RequestValidationError(
                [{"type": "json_invalid", "loc": ("body",), "msg": "malformed JSON"}]
            ) from None
    try:
        return TokenRequest.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from None


def _form_schema() -> dict[str, Any]:
    """The JSON schema without null: a form has no way to send one."""
    schema = TokenRequest.model_json_schema()
    schema["properties"]["scope"] = {"type": "string", "enum": ["read", "write"]}
    return schema


@router.post(
    "/v1/auth/token",
    response_model=TokenResponse,
    responses=responses(400, 401),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/x-www-form-urlencoded": {"schema": _form_schema()},
                "application/json": {"schema": TokenRequest.model_json_schema()},
            },
        }
    },
)
async def issue_token(
    authenticator: AuthenticatorDep,
    database: DatabaseDep,
    body: Annotated[TokenRequest, Depends(token_form)],
) -> TokenResponse:
    """OAuth2 client credentials: exchange a project client's id and secret for a bearer JWT."""
    token, ttl = await authenticator.issuer.exchange_client_credentials(
        database, client_id=body.client_id, client_secret=body.client_secret, scope=body.scope
    )
    return TokenResponse(access_token=token, expires_in=ttl)


@router.get("/.well-known/jwks.json", response_model=Jwks)
async def jwks(authenticator: AuthenticatorDep, database: DatabaseDep) -> Jwks:
    """Public keys of Tessera's token issuer (current and recently rotated)."""
    return Jwks.model_validate(await authenticator.issuer.jwks(database))
