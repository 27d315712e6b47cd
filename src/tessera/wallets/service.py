"""Native balances of wallets (a user's or the project's), read from a configured chain."""

import time
from collections.abc import Sequence

from tessera.chain.gateway import ChainGateway
from tessera.chain.keys import ss58_address
from tessera.chain.registry import Chains
from tessera.config import CHAINS, Chain
from tessera.models.base import CustodialKeyMixin
from tessera.wallets.schemas import AssetBalance, WalletBalance


async def read_balances(
    chains: Chains, chain_name: Chain | None, wallets: Sequence[CustodialKeyMixin]
) -> list[WalletBalance]:
    """One entry per wallet on ``chain_name`` (default: the first configured chain): its free
    native balance and the part of it that is frozen. 409 for a chain without an RPC URL, 503
    when the chain does not answer in time."""
    chain = chains.config(chain_name or _default_chain(chains))
    keys = [w.public_key for w in wallets]

    def read(gateway: ChainGateway) -> list[tuple[int, int]]:
        return [(b.free, b.frozen) for b in map(gateway.balance, keys)]

    balances = await chains.run(chain.name, read, in_request=True)
    now = int(time.time())
    return [
        WalletBalance(
            address=ss58_address(wallet.public_key, chain.ss58_prefix),
            type=wallet.type,
            code=200,
            message="OK",
            generated_at=now,
            data=[
                AssetBalance(
                    asset_id="native",
                    balance=str(free),
                    name=chain.name,
                    symbol=chain.symbol,
                    decimals=chain.decimals,
                    lock=str(frozen),
                )
            ],
        )
        for wallet, (free, frozen) in zip(wallets, balances, strict=True)
    ]


def _default_chain(chains: Chains) -> Chain:
    configured = chains.settings.configured_chains()
    return configured[0].name if configured else CHAINS[0]
