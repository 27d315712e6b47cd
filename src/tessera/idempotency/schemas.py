"""What an idempotent write keeps: whose keys (``KeyScope``) and the answer it gave."""

import uuid
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KeyScope:
    """Whose keys: a project's (``within`` empty) or one claim link's of it."""

    project_id: uuid.UUID
    within: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    """A kept answer: its status, its headers (those a replay repeats) and its body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
