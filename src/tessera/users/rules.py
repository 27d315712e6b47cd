"""The activation rule, which every domain that gives, moves or admits applies."""

from typing import Any

from tessera.auth.principal import Principal
from tessera.errors import UserNotActivated


def require_activated(principal: Principal, user: Any, action: str) -> None:
    """Where the project requires activation (Mufi's rule), an inactive user cannot
    ``action``: 409 naming the user and the rule."""
    if principal.require_activation and not user.is_activated:
        raise UserNotActivated(
            f"user {user.email} is not activated: this project requires activation to {action}"
        )
