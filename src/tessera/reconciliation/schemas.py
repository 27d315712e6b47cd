import uuid
from datetime import datetime
from typing import Any

from pydantic import Field

from tessera.reconciliation.findings import Action, Kind
from tessera.schemas import Bool, SnakeInput, SnakeModel

SIDE = (
    "What this side says, or null when it has nothing: an item's holder (`user_id`, `wallet`), "
    "an NFT's `owner`, `user_id` (the project user holding that wallet, or null) and "
    "`metadata`, a collection's `owner` and `max_supply`, a stuck row's status and `since`. "
    "Addresses are in the chain's SS58 format."
)


class FindingRead(SnakeModel):
    kind: Kind
    item_id: int | None = Field(description="The item's number; null for the collection.")
    database: dict[str, Any] | None = Field(description=SIDE)
    chain: dict[str, Any] | None = Field(description=SIDE)


class ReconciliationRead(SnakeModel):
    product_id: uuid.UUID
    chain: str
    collection_id: int | None
    checked_at: datetime
    items_checked: int
    findings: list[FindingRead]


class RepairRequest(SnakeInput):
    dry_run: Bool = Field(
        default=True, description="true (the default): answer the actions, change nothing."
    )


class RepairActionRead(SnakeModel):
    kind: Kind = Field(description="The finding's kind.")
    item_id: int | None
    action: Action
    job_id: uuid.UUID | None = Field(
        description="The job that carries the action out (null in a dry run, or for `report`)."
    )
    finding: FindingRead


class RepairRead(SnakeModel):
    product_id: uuid.UUID
    dry_run: bool
    checked_at: datetime
    actions: list[RepairActionRead]
