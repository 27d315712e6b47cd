"""Balances of custodial wallets, in the shape of Mufi's ``POST /v1/users/balances``."""

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
