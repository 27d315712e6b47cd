"""Custodial sr25519 keys for user and project wallets.

A wallet's secret is a random 32-byte sr25519 mini-secret (the seed substrate-interface's
``Keypair.create_from_seed`` takes), sealed at rest with the SecretBox. Only the public key and
its SS58 address are ever readable; the address is encoded with the configured prefix and can be
re-encoded for any chain from the public key.
"""

import os
from dataclasses import dataclass

import sr25519
from scalecodec.utils.ss58 import ss58_decode, ss58_encode
from substrateinterface import Keypair, KeypairType

from tessera.toolkit.crypto import Sealed, SecretBox

WALLET_TYPE = "Polkadot"
CUSTODIAL = "custodial"
USER_CONTROLLED = "user-controlled"  # linked by signing a challenge; no secret here


@dataclass(frozen=True, slots=True)
class CustodialKey:
    public_key: bytes
    address: str
    secret: Sealed

    def columns(self) -> dict[str, object]:
        """The wallet row's columns (see ``CustodialKeyMixin``)."""
        return {
            "type": WALLET_TYPE,
            "custody": CUSTODIAL,
            "public_key": self.public_key,
            "address": self.address,
            "secret_key_id": self.secret.key_id,
            "secret_blob": self.secret.blob,
        }


def wallet_aad(public_key: bytes) -> bytes:
    return b"tessera/wallet/" + public_key


def new_custodial_key(box: SecretBox, *, ss58_prefix: int) -> CustodialKey:
    seed = os.urandom(32)
    public_key, _ = sr25519.pair_from_seed(seed)
    return CustodialKey(
        public_key=public_key,
        address=ss58_address(public_key, ss58_prefix),
        secret=box.seal(seed, aad=wallet_aad(public_key)),
    )


def open_seed(box: SecretBox, *, public_key: bytes, secret: Sealed) -> bytes:
    """The sr25519 seed of a custodial wallet, for signing in the worker only."""
    return box.open(secret, aad=wallet_aad(public_key))


def ss58_address(public_key: bytes, prefix: int) -> str:
    return str(ss58_encode(public_key, ss58_format=prefix))


def public_key_of(address: str) -> bytes:
    """The public key an SS58 address encodes (any network prefix); ValueError otherwise."""
    try:
        public_key = bytes.fromhex(ss58_decode(address))
    except Exception as exc:  # scalecodec raises ValueError, IndexError, ...
        raise ValueError("not an SS58 address") from exc
    if len(public_key) != 32:
        raise ValueError("not the SS58 address of a 32-byte public key")
    return public_key


def signed_by(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is the sr25519 or ed25519 signature of ``message`` by the key, as
    substrate-interface verifies it; the ``<Bytes>...</Bytes>`` wrapping that Polkadot wallets
    add when they sign raw text is accepted too."""
    for crypto in (KeypairType.SR25519, KeypairType.ED25519):
        keypair = Keypair(public_key=public_key, crypto_type=crypto, ss58_format=42)
        for data in (message, b"<Bytes>" + message + b"</Bytes>"):
            try:
                if keypair.verify(data, signature):
                    return True
            except ValueError:  # not a signature of this scheme's shape
                continue
    return False
