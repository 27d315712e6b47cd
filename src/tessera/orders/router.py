import uuid
from typing import Annotated

from fastapi import Query, Request

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.mail.dependencies import for_request
from tessera.orders import service
from tessera.orders.schemas import OrderCreate, OrderFilter, OrderList, OrderRead, OrderView
from tessera.ticket_keys.dependencies import SignersDep
from tessera.web.routes import project_router

router = project_router("/orders", tags=["orders"])


@router.post(
    "", status_code=201, response_model=OrderRead, responses=responses(400, 401, 403, 404, 409)
)
async def create_order(
    request: Request,
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    body: OrderCreate,
) -> OrderRead:
    """Create an order (``completed`` by default, issuing its items; or ``pending``). When
    the project emails tickets, a completed order's buyer is emailed a link to each item."""
    return await service.create_order(
        database,
        principal,
        body=body,
        mail=for_request(request, principal, settings, signers),
    )


@router.get("", response_model=OrderList, responses=responses(400, 401))
async def list_orders(
    principal: ReadAccess, database: DatabaseDep, query: Annotated[OrderFilter, Query()]
) -> OrderList:
    """The project's orders with their lines, oldest first (``page`` from 1, ``limit`` 1-100,
    default 20); ``status``, ``user_id`` and ``product_id`` (orders with a line of that
    product) narrow the list, together when several are given."""
    return await service.list_orders(database, principal, query=query)


@router.get("/{id}", response_model=OrderRead, responses=responses(400, 401, 404))
async def get_order(principal: ReadAccess, database: DatabaseDep, id: uuid.UUID) -> OrderView:
    """One order with its lines and issued items."""
    return await service.get_order(database, principal, order_id=id)


@router.post(
    "/{id}/complete", response_model=OrderRead, responses=responses(400, 401, 403, 404, 409)
)
async def complete_order(
    request: Request,
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    id: uuid.UUID,
) -> OrderRead:
    """Complete a pending order and issue its items. When the project emails tickets, the
    buyer is emailed a link to each item."""
    return await service.complete_order(
        database,
        principal,
        order_id=id,
        mail=for_request(request, principal, settings, signers),
    )


@router.post("/{id}/cancel", response_model=OrderRead, responses=responses(400, 401, 403, 404, 409))
async def cancel_order(principal: WriteAccess, database: DatabaseDep, id: uuid.UUID) -> OrderRead:
    """Cancel a pending order."""
    return await service.cancel_order(database, principal, order_id=id)
