from typing import Literal

from pydantic import BaseModel, Field

from tessera.schemas import Input


class TokenRequest(Input):
    grant_type: Literal["client_credentials"] = "client_credentials"
    client_id: str = Field(min_length=1, max_length=128)
    client_secret: str = Field(min_length=1, max_length=256)
    scope: Literal["read", "write"] | None = None


class TokenResponse(BaseModel):
    access_token: str
    token_type: Literal["Bearer"] = "Bearer"  # noqa: S105 - the OAuth2 token type
    expires_in: int


class Jwks(BaseModel):
    keys: list[dict[str, str]]
