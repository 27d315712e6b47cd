"""A ticket's secret and its page's token, derived from the item and its ``ticket_version``.

Nothing secret is stored: each is the item's id followed by a 128-bit HMAC of it and the version
under ``TESSERA_HASH_KEY``. The id says which item to look at, the MAC whether the code is that
item's current one; counting the version up (a reissue, a transfer) makes every earlier secret
and page stop working at once. The secret is base32 (52 characters, the QR code's compact
alphanumeric mode, typed by a keyboard-wedge scanner in either case); the page token base64url
(43 characters, a path segment). The two use different keys of the MAC, so that neither can be
computed from the other.

A module of its own, below the packages that hand tickets out (products, orders, claims, the
mail) and the one that shows and checks them (tickets, checkins).
"""

import base64
import binascii
import hmac
import re
import uuid
from enum import Enum

MAC_BYTES = 16
SECRET_LENGTH = 52
TOKEN_LENGTH = 43
SECRET_PATTERN = re.compile(r"^[A-Za-z2-7]{52}$")
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
