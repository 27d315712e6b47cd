"""Secrets at rest and credential hashing.

``SecretBox`` seals secrets with AES-256-GCM under the key ring from settings. Each sealed value
keeps the id of the key that sealed it, so a new key can be put first in the ring while older
values stay readable. The associated data binds a ciphertext to its row (a wallet secret copied
onto another wallet does not open).
"""

import hmac
import os
import secrets
from dataclasses import dataclass
from typing import Annotated

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from fastapi import Depends, Request

NONCE_BYTES = 12


@dataclass(frozen=True, slots=True)
class Sealed:
    key_id: str
    blob: bytes  # nonce || ciphertext+tag


class SecretBox:
    def __init__(self, key_ring: dict[str, bytes]) -> None:
        self._ring = {kid: AESGCM(key) for kid, key in key_ring.items()}
        self.active_key_id = next(iter(key_ring))

    @property
    def key_ids(self) -> frozenset[str]:
        """The ids of the ring's keys: the sealed values it can open name one of them."""
        return frozenset(self._ring)

    def seal(self, plaintext: bytes, *, aad: bytes) -> Sealed:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ring[self.active_key_id].encrypt(nonce, plaintext, aad)
        return Sealed(self.active_key_id, nonce + sealed)

    def open(self, sealed: Sealed, *, aad: bytes) -> bytes:
        aead = self._ring.get(sealed.key_id)
        if aead is None:
            raise KeyError(f"secret key {sealed.key_id!r} is not in TESSERA_SECRET_KEYS")
        return aead.decrypt(sealed.blob[:NONCE_BYTES], sealed.blob[NONCE_BYTES:], aad)


def keyed_hash(hash_key: bytes, value: str) -> str:
    """HMAC-SHA256 of a credential: a leaked table alone cannot be used to check guesses."""
    return hmac.digest(hash_key, value.encode(), "sha256").hex()


def hashes_match(expected: str, actual: str) -> bool:
    return hmac.compare_digest(expected.encode(), actual.encode())


def token(nbytes: int) -> str:
    return secrets.token_urlsafe(nbytes)


async def box_of(request: Request) -> SecretBox:
    box: SecretBox = request.app.state.box
    return box


BoxDep = Annotated[SecretBox, Depends(box_of)]
