"""What a re-sealing reports."""

from tessera.schemas import SnakeModel


class Resealed(SnakeModel):
    active_key_id: str
    user_wallets: int
    project_wallets: int
    signing_keys: int
    webhook_secrets: int
    checkin_keys: int
