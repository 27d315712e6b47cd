"""What an idempotent write keeps: whose keys (``KeyScope``) and the answer it gave."""

import uuid
from dataclasses import dataclass

from starlette.types import Message

# Headers a replay does not repeat: each answer has its own.
_NOT_REPLAYED = frozenset({b"content-length", b"x-request-id", b"date", b"server"})


@dataclass(frozen=True, slots=True)
class KeyScope:
    """Whose keys: a project's (``within`` empty) or one claim link's of it."""

    project_id: uuid.UUID
    within: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @classmethod
    def of(cls, messages: list[Message]) -> "Answer | None":
        """The answer the app sent, or None for one that is not kept: none at all, an error
        of the server, a rate limit (the request did nothing; a retry is to run)."""
        start = next((m for m in messages if m["type"] == "http.response.start"), None)
        if start is None or start["status"] >= 500 or start["status"] == 429:
            return None
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in start.get("headers", [])
            if name.lower() not in _NOT_REPLAYED
        ]
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
        return cls(start["status"], headers, body)

    def replay(self) -> list[Message]:
        headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in self.headers]
        headers += [
            (b"content-length", str(len(self.body)).encode()),
            (b"idempotent-replayed", b"true"),
        ]
        return [
            {"type": "http.response.start", "status": self.status, "headers": headers},
            {"type": "http.response.body", "body": self.body},
        ]
