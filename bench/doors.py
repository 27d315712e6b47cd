"""Door devices of the event day: each syncs the event (``GET /v1/checkins/sync``), goes
offline, checks every secret it scans itself, by the format docs/tickets.md documents (not with
Tessera's code), and later uploads what it scanned in batches (``POST /v1/checkins/batch``)."""

import base64
import binascii
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SIGNED = 0x02
SIGNED_LENGTH = 143  # base32 characters of 89 bytes


@dataclass(frozen=True)
class Scan:
    """One scan a device made: what it scanned, when, and what the day expects of it
    (``first``: a holder's ticket at its first scan; ``second``: the same ticket scanned again
    later at another door; ``replaced``: the secret a transfer replaced)."""

    secret: str
    nonce: str
    scanned_at: datetime
    device: str
    kind: str
    item_id: uuid.UUID

    def body(self, event_id: str) -> dict[str, str]:
        return {
            "secret": self.secret,
            "nonce": self.nonce,
            "event_id": event_id,
            "scanned_at": self.scanned_at.isoformat(),
            "device": self.device,
        }


def parts(secret: str) -> tuple[str, uuid.UUID, int, bytes, bytes] | None:
    """A signed secret's kid, item id, version, signed bytes and signature: base32 (RFC 4648,
    upper case, no padding) of ``0x02 | kid (4) | item id (16) | version (4, big-endian) |
    Ed25519 signature of the first 25 bytes (64)``; None for any other text."""
    if len(secret) != SIGNED_LENGTH:
        return None
    try:
        raw = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    except binascii.Error:
        return None
    if len(raw) != 89 or raw[0] != SIGNED:
        return None
    item = uuid.UUID(bytes=raw[5:21])
    return raw[1:5].hex(), item, int.from_bytes(raw[21:25], "big"), raw[:25], raw[25:]


@dataclass
class Device:
    """A door: the keys and ticket versions of its last sync, and what it scanned since."""

    name: str
    keys: dict[str, Ed25519PublicKey] = field(default_factory=dict)
    versions: dict[uuid.UUID, int] = field(default_factory=dict)
    scans: list[Scan] = field(default_factory=list)
    admitted: int = 0  # scans the device let in offline

    def synced(self, answer: dict) -> None:
        for key in answer["keys"]:
            raw = base64.urlsafe_b64decode(key["public_key"] + "=" * (-len(key["public_key"]) % 4))
            self.keys[key["kid"]] = Ed25519PublicKey.from_public_bytes(raw)
        for ticket in answer["tickets"]:
            self.versions[uuid.UUID(ticket["id"])] = ticket["ticket_version"]

    def verdict(self, secret: str) -> str:
        """What the door says offline: ``valid``, ``revoked`` (an older version than the sync's),
        ``unknown`` (not a ticket of the event), or ``invalid`` (a signature that does not hold)."""
        found = parts(secret)
        if found is None:
            return "unknown"
        kid, item, version, signed, signature = found
        key = self.keys.get(kid)
        if key is None:
            return "invalid"
        try:
            key.verify(signature, signed)
        except InvalidSignature:
            return "invalid"
        current = self.versions.get(item)
        if current is None:
            return "unknown"
        return "revoked" if version < current else "valid"

    def scan(self, secret: str, *, at: datetime, kind: str, nonce: str) -> Scan:
        """Scanned offline at ``at``: checked here, kept for the upload whatever the verdict (the
        server records refused scans too)."""
        verdict = self.verdict(secret)
        if verdict == "valid":
            self.admitted += 1
        found = parts(secret)
        assert found is not None, "the day scans only signed secrets"
        made = Scan(secret, nonce, at, self.name, kind, found[1])
        self.scans.append(made)
        return made

    def batches(self, size: int) -> list[list[Scan]]:
        """Its scans in the order they were made, ``size`` at a time."""
        made = sorted(self.scans, key=lambda scan: scan.scanned_at)
        return [made[i : i + size] for i in range(0, len(made), size)]
