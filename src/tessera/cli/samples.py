"""`tessera demo`'s sample data, made through the same use-cases the API runs."""

import time
import uuid

from tessera.auth.principal import Principal
from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.db import Database
from tessera.events import service as events
from tessera.events.schemas import AttendeeRegister, EventCreate
from tessera.orders import service as orders
from tessera.orders.schemas import OrderCreate
from tessera.products import service as products
from tessera.products.item_schemas import ItemsIssue
from tessera.products.schemas import ProductCreate
from tessera.projects.service import create_project
from tessera.schemas import SnakeModel
from tessera.toolkit.crypto import SecretBox
from tessera.users import service as users
from tessera.users.schemas import UserCreate

PEOPLE = [("Ada", "Lovelace"), ("Alan", "Turing"), ("Grace", "Hopper"), ("Edsger", "Dijkstra")]


class DemoProject(SnakeModel):
    """What `tessera demo` made; the credentials only when it made a new project."""

    project_id: uuid.UUID
    users: list[str]
    event_id: uuid.UUID
    product_ids: list[uuid.UUID]
    api_key: str | None = None
    client_id: str | None = None
    client_secret: str | None = None


async def fill(
    database: Database, settings: Settings, *, project_id: uuid.UUID | None
) -> DemoProject:
    box = SecretBox(settings.key_ring)
    credentials: dict[str, str] = {}
    if project_id is None:
        created = await create_project(
            database,
            name="Demo project",
            box=box,
            hash_key=settings.hash_key_bytes,
            ss58_prefix=settings.ss58_prefix,
        )
        project_id = created.project_id
        credentials = created.model_dump(include={"api_key", "client_id", "client_secret"})
    principal = Principal(project_id, True, "cli:demo")
    chains = Chains(settings)  # the sample products mint nothing: no chain is dialled
    tag = uuid.uuid4().hex[:6]
    now = int(time.time())

    people = await users.create_users(
        database,
        principal,
        users=[
            UserCreate(
                email=f"{first.lower()}.{tag}@example.com",
                first_name=first,
                last_name=last,
                reference_id=f"demo-{tag}-{i}",
            )
            for i, (first, last) in enumerate(PEOPLE)
        ],
        box=box,
        ss58_prefix=settings.ss58_prefix,
    )
    festival = await events.create_event(
        database,
        principal,
        body=EventCreate(
            name="Demo Festival",
            start_date=now + 86400,
            end_date=now + 3 * 86400,
            location="Main Hall",
            address="1 Demo Street",
            reference_id=f"festival-{tag}",
        ),
    )
    admission = await products.create_product(
        database,
        principal,
        chains=chains,
        body=ProductCreate(
            type="admission",
            name="Festival pass",
            event_id=festival.id,
            description="Three days",
            price="49.99",
            stock=100,
            max_per_account=2,
            is_transferable=True,
        ),
    )
    perk = await products.create_product(
        database,
        principal,
        chains=chains,
        body=ProductCreate(
            type="perks", name="Drink voucher", description="Two drinks", redemption_quantity=2
        ),
    )
    await products.issue_items(
        database, principal, product_id=perk.id, body=ItemsIssue(users=[u.id for u in people])
    )
    for person in people[:2]:
        await orders.create_order(
            database,
            principal,
            body=OrderCreate.model_validate(
                {
                    "user": {"id": str(person.id)},
                    "items": [{"product_id": str(admission.id), "quantity": 1}],
                }
            ),
        )
        await events.register_attendee(
            database, principal, body=AttendeeRegister(event_id=festival.id, user_id=person.id)
        )
    return DemoProject(
        project_id=project_id,
        users=[u.email for u in people],
        event_id=festival.id,
        product_ids=[admission.id, perk.id],
        **credentials,
    )
