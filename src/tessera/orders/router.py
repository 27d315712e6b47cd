import uuid

from fastapi import APIRouter

from tessera.auth.dependencies import Reader, Writer
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.orders import service
from tessera.orders.schemas import OrderCreate, OrderRead

router = APIRouter(prefix="/orders", tags=["orders"])


def _read(view: service.OrderView) -> OrderRead:
    return OrderRead.of(view.order, view.lines, view.products, view.items)


@router.post(
    "", status_code=201, response_model=OrderRead, responses=responses(400, 401, 403, 404, 409)
)
async def create_order(database: DatabaseDep, principal: Writer, body: OrderCreate) -> OrderRead:
    """Create an order (``completed`` by default, issuing its items; or ``pending``)."""
    return _read(await service.create_order(database, principal, body=body))


@router.get("/{id}", response_model=OrderRead, responses=responses(400, 401, 404))
async def get_order(database: DatabaseDep, principal: Reader, id: uuid.UUID) -> OrderRead:
    """One order with its lines and issued items."""
    return await service.get_order(database, principal, order_id=id)


@router.post(
    "/{id}/complete", response_model=OrderRead, responses=responses(400, 401, 403, 404, 409)
)
async def complete_order(database: DatabaseDep, principal: Writer, id: uuid.UUID) -> OrderRead:
    """Complete a pending order and issue its items."""
    return _read(await service.complete_order(database, principal, order_id=id))


@router.post("/{id}/cancel", response_model=OrderRead, responses=responses(400, 401, 403, 404, 409))
async def cancel_order(database: DatabaseDep, principal: Writer, id: uuid.UUID) -> OrderRead:
    """Cancel a pending order."""
    return _read(await service.cancel_order(database, principal, order_id=id))
