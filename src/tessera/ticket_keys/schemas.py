"""A check-in key as a door syncs it and the CLI lists it (never its private half)."""

import base64
from datetime import datetime
from typing import Literal

from pydantic import Field

from tessera.schemas import SnakeModel


class PublicCheckinKey(SnakeModel):
    kid: str = Field(description="The key's id, 8 hex digits: bytes 2-5 of each secret it signs.")
    alg: Literal["Ed25519"] = "Ed25519"
    public_key: str = Field(description="The 32-byte public key, base64url without padding.")

    @classmethod
    def of(cls, kid: str, public_key: bytes) -> "PublicCheckinKey":
        return cls(kid=kid, public_key=base64.urlsafe_b64encode(public_key).decode().rstrip("="))


class CheckinKeyRead(PublicCheckinKey):
    """A key as ``tessera project checkin-keys`` lists it."""

    created_at: datetime
    retired_at: datetime | None
    signing: bool = Field(description="Whether new secrets are signed with it (the newest live).")
