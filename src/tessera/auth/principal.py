import uuid
from dataclasses import dataclass

from tessera.models.project import Permission

__all__ = ["Permission", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the project every query is scoped to, whether it may write, and the
    project's rules that use-cases apply, as read with the credential (a change reaches every
    process within the credential cache's lifetime, at most 2 s)."""

    project_id: uuid.UUID
    can_write: bool
    credential: str  # "api_key:<id>", "client:<client_id>", "oidc:<issuer>#<subject>"
    # Mufi's rule: only an activated user receives items, attends and sends transfers.
    require_activation: bool = False
    # Users who receive items are emailed their tickets (tessera.mail; with TESSERA_SMTP_URL).
    ticket_emails: bool = False
    # A check-in key: the door's routes only (``DoorReadAccess``, ``DoorWriteAccess``), writes too.
    door_only: bool = False
