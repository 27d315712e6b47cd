"""Native balances of custodial wallets, in the shape of Mufi's ``POST /v1/users/balances``."""

import time
from collections.abc import Sequence

from tessera.chain.gateway import ChainGateway
from tessera.chain.keys import ss58_address
from tessera.chain.registry import Chains
from tessera.config import CHAINS, Chain
from tessera.models.base import CustodialKeyMixin
from tessera.schemas import SnakeModel


class AssetBalance(SnakeModel):
    asset_id: str
    balance: str
    name: str
    symbol: str
    decimals: int
    lock: str


class WalletBalance(SnakeModel):
    address: str
    type: str
    code: int
    message: str
    generated_at: int
    data: list[AssetBalance] | None


def default_chain(chains: Chains) -> Chain:
    configured = chains.settings.configured_chains()
    return configured[0].name if configured else CHAINS[0]


async def wallet_balances(
    chains: Chains, chain_name: str, wallets: Sequence[CustodialKeyMixin]
) -> list[WalletBalance]:
    """One entry per wallet: its free native balance and the part of it that is frozen."""
    chain = chains.config(chain_name)
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
