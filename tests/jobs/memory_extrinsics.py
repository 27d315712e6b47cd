"""The extrinsics of the in-memory Asset Hub (``memory_chain``): what they cost and weigh, how
``sign`` encodes them (hex JSON of the signer's seed, the nonce, the parts as
``tessera.chain.extrinsics.parts_json`` writes them, and the mortal era, with a proof over the
rest: bytes changed after signing are refused as a bad proof), and what became of one in a
block."""

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import sr25519

from tessera.chain.extrinsics import call_name, parts_json, parts_of, tx_hash
from tessera.chain.gateway import Part, PartOutcome, Rejected, Signed
from tests.jobs.memory_pallets import DOT

# The fee of an extrinsic: a base and so much per part; FEE: that of one part.
FEE_PER_PART = DOT // 10_000
FEE = DOT // 1000
# The weight of an extrinsic (ref time, ps): a base and so much per part.
BASE_WEIGHT, PART_WEIGHT = 10**8, 10**9


def fee(parts: int) -> int:
    return FEE - FEE_PER_PART + parts * FEE_PER_PART


@functools.cache
def signer_of(seed: bytes) -> bytes:
    return bytes(sr25519.pair_from_seed(seed)[0])


@dataclass(frozen=True)
class Tx:
    """An extrinsic as ``sign`` encoded it."""

    data: str
    tx_hash: str
    signer: bytes
    nonce: int
    parts: tuple[Part, ...]
    valid_from: int
    valid_until: int


@dataclass(frozen=True)
class Applied:
    """An extrinsic in a block: the fee it paid and each part's fate."""

    tx: Tx
    fee: int
    outcomes: tuple[PartOutcome, ...]

    @property
    def call(self) -> str:
        return call_name(self.tx.parts)


@dataclass(frozen=True)
class Block:
    number: int
    hash: str
    extrinsics: tuple[Applied, ...]


def encode(
    seed: bytes, parts: Sequence[Part], *, nonce: int, era: tuple[int, int], salt: int
) -> Signed:
    """``parts`` signed by ``seed`` with ``nonce``, to land in blocks ``era[0]`` to
    ``era[1] - 1``; ``salt``: sr25519 signs the same payload differently each time."""
    valid_from, valid_until = era
    body: dict[str, object] = {
        "signer": signer_of(seed).hex(),
        "nonce": nonce,
        "parts": parts_json(parts),
        "valid_from": valid_from,
        "valid_until": valid_until,
        "salt": salt,
    }
    proof = _proof(seed, body)
    data = "0x" + json.dumps({"seed": seed.hex(), "proof": proof, **body}).encode().hex()
    return Signed(data, nonce, tx_hash(data), valid_from, valid_until)


def decode(extrinsic: str) -> Tx:
    """The extrinsic ``encode`` made; refused as the pool refuses bytes it cannot verify."""
    try:
        body = json.loads(bytes.fromhex(extrinsic.removeprefix("0x")))
        seed, proof = bytes.fromhex(body.pop("seed")), body.pop("proof")
        good = proof == _proof(seed, body) and signer_of(seed).hex() == body["signer"]
    except (ValueError, KeyError, TypeError, AttributeError):
        good = False
    if not good:
        raise Rejected("rejected: invalid.badProof", dead=True)
    return Tx(
        extrinsic,
        tx_hash(extrinsic),
        bytes.fromhex(body["signer"]),
        body["nonce"],
        tuple(parts_of(body["parts"])),
        body["valid_from"],
        body["valid_until"],
    )


def _proof(seed: bytes, body: dict[str, object]) -> str:
    payload = seed + json.dumps(body, sort_keys=True).encode()
    return hashlib.blake2b(payload, digest_size=32).hexdigest()
