"""What the use-cases call: ``record(tx, project_id, EventType.X, objects)`` writes one change
per object, rendered as the API renders it, in the caller's transaction: a change exists
exactly when the state it reports was committed."""

import uuid
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.changes import repository
from tessera.db import Transaction
from tessera.models import Change
from tessera.models.base import new_id, utcnow


class EventType(StrEnum):
    """Each type and what its ``data`` is (docs/webhooks.md)."""

    USER_CREATED = "user.created"  # the user, as users/create answers (with wallets)
    USER_ACTIVATED = "user.activated"  # the user, as users/profile answers
    ATTENDEE_REGISTERED = "attendee.registered"  # the attendee, as events/attendees answers
    ATTENDEE_CHECKED_IN = "attendee.checked_in"  # the attendee
    PRODUCT_CREATED = "product.created"  # the product, as GET /v1/products/{id} answers
    PRODUCT_UPDATED = "product.updated"  # the product
    ITEM_ISSUED = "item.issued"  # the item, as the items endpoints answer
    ITEM_REDEEMED = "item.redeemed"  # the item, as redeem answers
    ITEM_TRANSFERRED = "item.transferred"  # the transfer, as transfer answers
    ORDER_CREATED = "order.created"  # the order, as GET /v1/orders/{id} answers
    ORDER_COMPLETED = "order.completed"  # the order
    ORDER_CANCELLED = "order.cancelled"  # the order
    NFT_COLLECTION_CREATED = "nft.collection_created"  # the product
    NFT_MINTED = "nft.minted"  # the item
    NFT_TRANSFERRED = "nft.transferred"  # the item
    NFT_FAILED = "nft.failed"  # {"job", "error", and "product" or "product_item"}
    NFT_DRIFT_FOUND = "nft.drift_found"  # the reconciliation, as GET .../reconciliation answers
    CLAIM_CLAIMED = "claim.claimed"  # {"claim_link_id", "user_id", "product_item"}
    TICKET_REISSUED = "ticket.reissued"  # {"id", "item_id", "product_id", "user_id"}
    CHECKIN_CREATED = "checkin.created"  # the scan's answer, with its "nonce"
    CHECKIN_ANNULLED = "checkin.annulled"  # the annulled scan's answer, with "annulled_at"
    # A mail given up: {"id", "to", "subject", "cause", "attempts", "error", "created_at"}
    MAIL_FAILED = "mail.failed"


EVENT_TYPES = tuple(EventType)


async def record(
    tx: Transaction | AsyncSession,
    project_id: uuid.UUID,
    type: EventType,
    objects: Sequence[BaseModel],
) -> None:
    """A change of ``type`` for each object, in ``tx`` (a use-case's transaction, or an ORM
    session that the caller commits)."""
    if not objects:
        return
    now = utcnow()
    rows = [
        {
            "id": new_id(),
            "project_id": project_id,
            "type": type.value,
            "created_at": now,
            "data": data.model_dump_json(by_alias=True),
        }
        for data in objects
    ]
    if isinstance(tx, AsyncSession):
        await repository.insert_changes(tx, rows)
    else:
        tx.stage(Change, rows)  # written with the transaction's other changes, at its commit
