"""What a signer's extrinsic costs, and how many parts of one shape fit one: measured from the
runtime's own weights and fees (``ChainGateway``), kept for ``CAPACITY_SECONDS``."""

import logging
import time

from tessera.chain.gateway import (
    ChainGateway,
    Mint,
    Part,
    Weight,
)
from tessera.extrinsics.schemas import Costs
from tessera.jobs.worker import JobContext

log = logging.getLogger("tessera.extrinsics")

# A batch's capacity is measured again after this long (a runtime upgrade changes weights).
CAPACITY_SECONDS = 600.0


async def capacity(context: JobContext, chain: str, signer: bytes, shape: Part) -> int:
    """How many parts like ``shape`` one extrinsic may carry: the runtime's own weights of an
    extrinsic of one part and of two (``TransactionPaymentApi``) against what the normal class
    of a block holds (``System.BlockWeights``, ``System.BlockLength``), less the share left to
    other traffic (``chain_block_headroom``). Measured once every ten minutes per kind of
    part."""
    return (await costs(context, chain, signer, shape)).capacity


async def costs(context: JobContext, chain: str, signer: bytes, shape: Part) -> Costs:
    chains = context.chains
    key = (chain, _shape(shape))
    cached = chains.capacities.get(key)
    if cached is not None and cached[0] > time.monotonic():
        found: Costs = cached[1]
        return found

    def measure(gateway: ChainGateway) -> Costs:
        limits = gateway.limits()
        one, two = gateway.weigh(signer, [shape]), gateway.weigh(signer, [shape, shape])
        keep = 1 - chains.settings.chain_block_headroom
        budget = Weight(
            ref_time=int(min(limits.ref_time, limits.total_ref_time * keep)),
            proof_size=int(min(limits.proof_size, limits.total_proof_size * keep)),
            length=int(limits.length * keep),
            fee=0,
        )
        fits = []
        for name in ("ref_time", "proof_size", "length"):
            per = getattr(two, name) - getattr(one, name)
            base = getattr(one, name) - per
            if per > 0:
                fits.append((getattr(budget, name) - base) // per)
        per_fee = max(two.fee - one.fee, 0)
        return Costs(max(1, min(fits, default=1)), max(one.fee - per_fee, 0), per_fee)

    measured = await chains.run(chain, measure)
    chains.capacities[key] = (time.monotonic() + CAPACITY_SECONDS, measured)
    return measured


def _shape(part: Part) -> tuple[object, ...]:
    """What sets a part's weight and length: its kind and the size of what it carries."""
    if isinstance(part, Mint):
        return ("mint", part.owner is not None, len(part.metadata or ""))
    return (type(part).__name__,)


# Signing.
