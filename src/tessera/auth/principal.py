import uuid
from dataclasses import dataclass

from tessera.models.project import Permission

__all__ = ["Permission", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the project every query is scoped to, and whether it may write."""

    project_id: uuid.UUID
    can_write: bool
    credential: str  # "api_key:<id>", "client:<client_id>", "oidc:<issuer>#<subject>"
