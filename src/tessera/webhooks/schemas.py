import uuid
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Self

from pydantic import Field

from tessera.changes.schemas import EventType
from tessera.models import DeliveryStatus
from tessera.schemas import Bool, Pagination, SnakeInput, SnakeModel

if TYPE_CHECKING:
    from tessera.webhooks.repository import DeliveryRow, EndpointRow

EventTypes = list[EventType] | None
TYPES_DOC = "The event types delivered; absent or null: every type, those added later too."


class WebhookCreate(SnakeInput):
    url: str = Field(
        max_length=2048,
        description="An https URL on a public address (checked when registered and at each "
        "delivery); its form is the pattern's.",
    )
    event_types: EventTypes = Field(default=None, min_length=1, description=TYPES_DOC)


class WebhookUpdate(SnakeInput):
    url: str | None = Field(default=None, max_length=2048)
    event_types: EventTypes = Field(default=None, min_length=1, description=TYPES_DOC)
    enabled: Bool | None = Field(
        default=None,
        description="true enables a disabled endpoint again: it resumes with the first "
        "change it did not receive; false stops deliveries (changes are kept meanwhile).",
    )


class WebhookStatus(StrEnum):
    ENABLED = "enabled"
    FAILING = "failing"  # enabled, retrying a change that it has not accepted yet
    DISABLED = "disabled"


class WebhookRead(SnakeModel):
    id: uuid.UUID
    url: str
    event_types: list[str] | None
    status: WebhookStatus
    disabled_reason: str | None
    failing_since: datetime | None
    next_attempt_at: datetime | None = Field(description="When a failing endpoint is retried.")
    secret_hint: str = Field(description="The secret's first characters.")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: "EndpointRow") -> Self:
        if not row.enabled:
            status = WebhookStatus.DISABLED
        elif row.failing_since is not None:
            status = WebhookStatus.FAILING
        else:
            status = WebhookStatus.ENABLED
        return cls(
            id=row.id,
            url=row.url,
            event_types=row.event_types,
            status=status,
            disabled_reason=row.disabled_reason,
            failing_since=row.failing_since,
            next_attempt_at=row.next_attempt_at if status is WebhookStatus.FAILING else None,
            secret_hint=row.secret_hint,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class WebhookCreated(WebhookRead):
    secret: str = Field(
        description="The signing secret (Standard Webhooks, `whsec_...`), shown here only."
    )


class WebhookList(SnakeModel):
    webhooks: list[WebhookRead]
    pagination: Pagination


class DeliveryRead(SnakeModel):
    id: uuid.UUID
    event_id: uuid.UUID
    event_type: str
    replay: bool
    status: DeliveryStatus
    response_status: int | None
    response_body: str | None = Field(description="The first KiB of the receiver's answer.")
    error: str | None
    duration_ms: int | None
    created_at: datetime

    @classmethod
    def of(cls, row: "DeliveryRow") -> Self:
        return cls(
            id=row.id,
            event_id=row.change_id,
            event_type=row.change_type,
            replay=row.replay,
            status=row.status if row.status != "sending" else DeliveryStatus.PENDING,
            response_status=row.response_status,
            response_body=row.response_body,
            error=row.error,
            duration_ms=row.duration_ms,
            created_at=row.created_at,
        )


class DeliveryList(SnakeModel):
    deliveries: list[DeliveryRead]
    pagination: Pagination
