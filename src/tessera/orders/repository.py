"""Order queries."""

import uuid

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload

from tessera.db import get_in_project
from tessera.errors import OrderNotFound
from tessera.models import Order


async def get_order(
    session: AsyncSession, project_id: uuid.UUID, order_id: uuid.UUID, *, lock: bool = False
) -> Order:
    """The project's order with its lines; ``lock`` holds it until the transaction ends."""
    return await get_in_project(
        session,
        Order,
        project_id,
        Order.id == order_id,
        not_found=OrderNotFound,
        lock=lock,
        options=[selectinload(Order.lines)],
    )
