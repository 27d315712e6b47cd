"""A ticket's secret and its page's token, derived from the item and its ``ticket_version``.

The secret is signed, so that a door can check it offline with the project's public check-in
key (``tessera.ticket_keys``): base32 (RFC 4648 alphabet, upper case, no padding; 143
characters, the QR code's compact alphanumeric mode, typed by a keyboard-wedge scanner in either
case) of 89 bytes::

    0x02 | kid (4) | item id (16, the item's UUID) | ticket_version (4, big-endian) | signature (64)

the signature being Ed25519's of the first 25 bytes. The kid says which of the project's keys
signed; the version, whether the secret is the item's current one: counting it up (a reissue,
a transfer) revokes every earlier secret at once.

The page token, and the secrets handed out before signed ones (the legacy form, still accepted
online), are the item's id followed by a 128-bit HMAC of it and the version under
``TESSERA_HASH_KEY``: base64url (43 characters, a path segment) and base32 (52 characters). The
two use different keys of the MAC, so that neither can be computed from the other.

A module of its own, below the packages that hand tickets out (products, orders, claims, the
mail) and the one that shows and checks them (tickets, checkins).
"""

import base64
import binascii
import hmac
import re
import uuid
from enum import Enum
from typing import NamedTuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

MAC_BYTES = 16
SECRET_LENGTH = 52
TOKEN_LENGTH = 43
SECRET_PATTERN = re.compile(r"^[A-Za-z2-7]{52}$")
SIGNED_FORMAT = 0x02
SIGNED_LENGTH = 143  # characters: base32 of 89 bytes, unpadded
SIGNED_PATTERN = re.compile(r"^[A-Za-z2-7]{143}$")
KID_BYTES = 4
_SIGNED_PART = 1 + KID_BYTES + 16 + 4  # what the signature covers
TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{43}$")


class Use(Enum):
    SECRET = b"tessera ticket secret\0"
    PAGE = b"tessera ticket page\0"


def _mac(hash_key: bytes, use: Use, item_id: uuid.UUID, version: int) -> bytes:
    message = use.value + item_id.bytes + version.to_bytes(8, "big")
    return hmac.digest(hash_key, message, "sha256")[:MAC_BYTES]


def secret(hash_key: bytes, item_id: uuid.UUID, version: int) -> str:
    code = item_id.bytes + _mac(hash_key, Use.SECRET, item_id, version)
    return base64.b32encode(code).decode().rstrip("=")


def page_token(hash_key: bytes, item_id: uuid.UUID, version: int) -> str:
    code = item_id.bytes + _mac(hash_key, Use.PAGE, item_id, version)
    return base64.urlsafe_b64encode(code).decode().rstrip("=")


def page_url(base_url: str, hash_key: bytes, item_id: uuid.UUID, version: int) -> str:
    """The ticket's page: ``{base_url}/tickets/{token}``."""
    return f"{base_url}/tickets/{page_token(hash_key, item_id, version)}"


def item_of(use: Use, text: str) -> uuid.UUID | None:
    """The item a well-formed secret or token names (None for any other text): whether it is
    that item's current one is for ``is_current`` to say."""
    if use is Use.SECRET:
        if not SECRET_PATTERN.match(text):
            return None
        raw = base64.b32decode(text.upper() + "====")
    else:
        if not TOKEN_PATTERN.match(text):
            return None
        try:
            raw = base64.urlsafe_b64decode(text + "=")
        except (binascii.Error, ValueError):
            return None
    return uuid.UUID(bytes=raw[:16])


def is_current(hash_key: bytes, use: Use, text: str, version: int) -> bool:
    """Whether ``text`` (well-formed, see ``item_of``) is its item's code at ``version``."""
    item_id = item_of(use, text)
    if item_id is None:
        return False
    if use is Use.SECRET:  # base32: either case is the same secret
        return hmac.compare_digest(secret(hash_key, item_id, version), text.upper())
    return hmac.compare_digest(page_token(hash_key, item_id, version), text)


class SignedSecret(NamedTuple):
    """A well-formed signed secret, read but not yet verified."""

    kid: str  # the signing key's id: its 4 bytes as 8 lowercase hex digits
    item_id: uuid.UUID
    version: int
    signed: bytes  # the 25 bytes the signature covers
    signature: bytes


def signed_secret(key: Ed25519PrivateKey, kid: str, item_id: uuid.UUID, version: int) -> str:
    """The item's secret at ``version``, signed with the project's check-in key ``kid``."""
    signed = (
        bytes([SIGNED_FORMAT]) + bytes.fromhex(kid) + item_id.bytes + version.to_bytes(4, "big")
    )
    return base64.b32encode(signed + key.sign(signed)).decode().rstrip("=")


def read_signed(text: str) -> SignedSecret | None:
    """The parts of a signed secret (None for any other text, a legacy secret included)."""
    if not SIGNED_PATTERN.match(text):
        return None
    raw = base64.b32decode(text.upper() + "=" * (-len(text) % 8))
    if raw[0] != SIGNED_FORMAT:
        return None
    return SignedSecret(
        kid=raw[1 : 1 + KID_BYTES].hex(),
        item_id=uuid.UUID(bytes=raw[5:21]),
        version=int.from_bytes(raw[21:25], "big"),
        signed=raw[:_SIGNED_PART],
        signature=raw[_SIGNED_PART:],
    )


def signature_holds(public_key: bytes, secret: SignedSecret) -> bool:
    """Whether the secret's signature is the key's (32 raw bytes) over its first 25 bytes.

    libsodium's (PyNaCl) check: half the time of OpenSSL's here, and it lets go of the GIL, so
    a door's upload checks its 500 in a thread beside the event loop (bench/README.md)."""
    try:
        VerifyKey(public_key).verify(secret.signed, secret.signature)
    except BadSignatureError:
        return False
    return True


def is_secret_shaped(text: str) -> bool:
    """Whether ``text`` has a secret's shape (signed or legacy), whatever it names."""
    return read_signed(text) is not None or item_of(Use.SECRET, text) is not None


def legacy_version(hash_key: bytes, text: str, current: int) -> int | None:
    """Which version of its item a legacy secret (52 characters, see the module docstring) was
    made for, looking back from ``current``; None when it is none of them."""
    for version in range(current, max(0, current - LEGACY_LOOKBACK), -1):
        if is_current(hash_key, Use.SECRET, text, version):
            return version
    return None


# How many versions back a legacy secret is recognised as revoked (rather than unknown).
LEGACY_LOOKBACK = 16
