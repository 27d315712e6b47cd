"""The ledger's values: who signs (``Signer``), what an extrinsic of a shape costs, one to
follow, and its fate (``Landed`` in a final block, or ``Gone``)."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from tessera.chain.gateway import Inclusion, Outcome, Part
from tessera.extrinsics.repository import ExtrinsicRow


@dataclass(frozen=True, slots=True)
class Signer:
    """A custodial key that signs for a project on a chain."""

    project_id: uuid.UUID
    chain: str
    public_key: bytes
    seed: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class Landed:
    """An extrinsic in a final block, and what became of each of its parts."""

    extrinsic: ExtrinsicRow
    inclusion: Inclusion
    outcome: Outcome

    @property
    def block(self) -> tuple[int, str, int]:
        return (self.inclusion.block_number, self.inclusion.block_hash, self.inclusion.index)


@dataclass(frozen=True, slots=True)
class Gone:
    """An extrinsic that will not land where it was (``reason``). ``live``: its bytes may still
    land (its block was dropped before it was final), so it is followed again, never signed
    anew; else they never will."""

    reason: str
    live: bool


@dataclass(frozen=True, slots=True)
class Costs:
    """What parts like one shape cost: ``capacity`` of them fit one extrinsic, whose fee is
    about ``fee_base + fee_per_part`` per part."""

    capacity: int
    fee_base: int
    fee_per_part: int


@dataclass(frozen=True, slots=True)
class Followed:
    """An extrinsic to follow: its signer, its row as recorded, its parts as signed."""

    signer: Signer
    row: ExtrinsicRow
    parts: Sequence[Part]
