import uuid
from typing import Annotated

from fastapi import FastAPI, Header, Query, Response

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.changes.schemas import ChangeRead
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.schemas import PageParams
from tessera.toolkit.crypto import BoxDep
from tessera.web.routes import project_router
from tessera.webhooks import service
from tessera.webhooks.schemas import (
    DeliveryList,
    DeliveryRead,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookRead,
    WebhookUpdate,
)

router = project_router("/webhooks", tags=["webhooks"])


@router.post("", status_code=201, response_model=WebhookCreated, responses=responses(400, 401, 403))
async def create_webhook(
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    box: BoxDep,
    body: WebhookCreate,
) -> WebhookCreated:
    """Register an endpoint for the project's changes (`event_types`, or all). It receives
    those committed from now on, each signed with the `secret` shown in this answer only. The
    URL must be https on a public address (400), unless `TESSERA_WEBHOOKS_ALLOW_PRIVATE`."""
    return await service.create_webhook(
        database,
        principal,
        body=body,
        box=box,
        allow_private=settings.webhooks_allow_private,
    )


@router.get("", response_model=WebhookList, responses=responses(400, 401))
async def list_webhooks(
    principal: ReadAccess, database: DatabaseDep, paging: Annotated[PageParams, Query()]
) -> WebhookList:
    """The project's endpoints, oldest first (`page` from 1, `limit` 1-100, default 20)."""
    return await service.list_webhooks(database, principal, paging=paging)


@router.get("/{id}", response_model=WebhookRead, responses=responses(400, 401, 404))
async def get_webhook(principal: ReadAccess, database: DatabaseDep, id: uuid.UUID) -> WebhookRead:
    """One endpoint (never its secret)."""
    return await service.get_webhook(database, principal, endpoint_id=id)


@router.patch("/{id}", response_model=WebhookRead, responses=responses(400, 401, 403, 404))
async def update_webhook(
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    id: uuid.UUID,
    body: WebhookUpdate,
) -> WebhookRead:
    """Change the `url` or the `event_types`, or `enabled`: true resumes a disabled endpoint
    with the first change it did not accept."""
    return await service.update_webhook(
        database,
        principal,
        endpoint_id=id,
        body=body,
        allow_private=settings.webhooks_allow_private,
    )


@router.delete("/{id}", status_code=204, responses=responses(400, 401, 403, 404))
async def delete_webhook(principal: WriteAccess, database: DatabaseDep, id: uuid.UUID) -> Response:
    """Delete the endpoint and its delivery attempts."""
    await service.delete_webhook(database, principal, endpoint_id=id)
    return Response(status_code=204)


@router.get("/{id}/deliveries", response_model=DeliveryList, responses=responses(400, 401, 404))
async def list_deliveries(
    principal: ReadAccess,
    database: DatabaseDep,
    id: uuid.UUID,
    paging: Annotated[PageParams, Query()],
) -> DeliveryList:
    """The endpoint's delivery attempts, newest first (`page` from 1, `limit` 1-100)."""
    return await service.list_deliveries(database, principal, endpoint_id=id, paging=paging)


@router.post(
    "/{id}/deliveries/{delivery_id}/replay",
    status_code=202,
    response_model=DeliveryRead,
    responses=responses(400, 401, 403, 404),
)
async def replay_delivery(
    principal: WriteAccess, database: DatabaseDep, id: uuid.UUID, delivery_id: uuid.UUID
) -> DeliveryRead:
    """Send that delivery's event to the endpoint once more (same `webhook-id`); the attempt
    is `pending` until the worker sends it."""
    return await service.replay_delivery(
        database, principal, endpoint_id=id, delivery_id=delivery_id
    )


def document_deliveries(app: FastAPI) -> None:
    """What Tessera sends to an endpoint, as an OpenAPI ``webhooks`` entry."""

    @app.webhooks.post("change", tags=["webhooks"], status_code=200)
    def change(
        body: ChangeRead,
        webhook_id: Annotated[
            str, Header(alias="webhook-id", description="The event's id: the same on a retry.")
        ],
        webhook_timestamp: Annotated[
            str,
            Header(
                alias="webhook-timestamp", description="Unix seconds when this attempt was signed."
            ),
        ],
        webhook_signature: Annotated[
            str,
            Header(
                alias="webhook-signature",
                description="`v1,` then the base64 HMAC-SHA256, under the endpoint's secret "
                "(the base64 after `whsec_`), of `{webhook-id}.{webhook-timestamp}.{body}`.",
            ),
        ],
    ) -> None:
        """One change of the project, as `GET /v1/changes` shows it, signed per the Standard
        Webhooks specification. Answer any 2xx within the timeout (10 s by default) to accept
        it; anything else is retried (5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, then every
        6 h) and the changes after it wait, so each endpoint receives them in order. An
        endpoint failing for 3 days is disabled. Deduplicate by `webhook-id`."""
