"""Mufi's older calls (its OpenAPI still lists them, ``deprecated``), so that a client written
against them moves to Tessera by changing its base URL. Each is a thin alias of today's
use-case, with the older request and answer shapes; the rules are today's."""

from fastapi import Request

from tessera.auth.dependencies import WriteAccess
from tessera.chain.registry import ChainsDep
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import ProductItemNotFound, responses
from tessera.legacy.schemas import (
    LegacyItem,
    LegacyItemRedeem,
    LegacyItems,
    LegacyItemsCreate,
    LegacyProductCreate,
    LegacyProductRead,
    LegacyUser,
    LegacyUserCreate,
)
from tessera.mail.dependencies import for_request
from tessera.products import repository as products_repository
from tessera.products import service as products
from tessera.products.item_schemas import ItemsIssue, RedeemRequest
from tessera.ticket_keys.dependencies import SignersDep
from tessera.toolkit.crypto import BoxDep
from tessera.users import service as users
from tessera.web.routes import concrete_paths_own_their_methods, project_router

router = project_router("", tags=["older calls (Mufi)"])
concrete_paths_own_their_methods(router, "/products/create")  # not GET /products/{id}


@router.post(
    "/products/create",
    status_code=201,
    response_model=LegacyProductRead,
    responses=responses(400, 401, 403, 404, 409, 503),
    deprecated=True,
)
async def create_product(
    principal: WriteAccess, database: DatabaseDep, chains: ChainsDep, body: LegacyProductCreate
) -> LegacyProductRead:
    """Older ``POST /v1/products``: type ``redeemable_item`` (created as ``perks``)."""
    product = await products.create_product(database, principal, body=body.current(), chains=chains)
    return LegacyProductRead.of(product)


@router.post(
    "/products/items/create",
    status_code=201,
    response_model=LegacyItems,
    responses=responses(400, 401, 403, 404, 409),
    deprecated=True,
)
async def create_product_items(
    request: Request,
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    body: LegacyItemsCreate,
) -> LegacyItems:
    """Older ``POST /v1/products/{id}/items``: the product in the body, users by id."""
    items = await products.issue_items(
        database,
        principal,
        product_id=body.product_id,
        body=ItemsIssue(users=body.users),
        mail=for_request(request, principal, settings, signers),
    )
    return LegacyItems(items=[LegacyItem.model_validate(item.row) for item in items])


@router.post(
    "/products/items/redeem",
    response_model=LegacyItem,
    responses=responses(400, 401, 403, 404, 409),
    deprecated=True,
)
async def redeem_product_item(
    principal: WriteAccess, database: DatabaseDep, body: LegacyItemRedeem
) -> LegacyItem:
    """Older ``POST /v1/products/{id}/items/redeem``: the item alone names its product."""
    product_id = await database.read(
        products_repository.product_of_item, principal.project_id, body.product_item_id
    )
    if product_id is None:
        raise ProductItemNotFound
    item, _ = await products.redeem_item(
        database,
        principal,
        product_id=product_id,
        body=RedeemRequest(product_item_id=body.product_item_id),
    )
    return LegacyItem.model_validate(item.row)


@router.post(
    "/user",
    status_code=201,
    response_model=LegacyUser,
    response_model_exclude_none=True,
    responses=responses(400, 401, 403, 409),
    deprecated=True,
)
async def create_user(
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    box: BoxDep,
    body: LegacyUserCreate,
) -> LegacyUser:
    """Oldest ``POST /v1/users/create``: one user (first and last name required), with its
    custodial wallet."""
    [user] = await users.create_users(
        database,
        principal,
        users=[body.current()],
        box=box,
        ss58_prefix=settings.ss58_prefix,
    )
    return LegacyUser.model_validate(user)
