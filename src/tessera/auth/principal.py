import uuid
from dataclasses import dataclass
from typing import Literal

Permission = Literal["read", "write"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the project every query is scoped to, and whether it may write."""

    project_id: uuid.UUID
    can_write: bool
    credential: str  # "api_key:<id>", "client:<client_id>", "oidc:<issuer>#<subject>"
