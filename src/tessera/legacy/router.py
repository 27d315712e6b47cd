"""Mufi's older calls (its OpenAPI still lists them, ``deprecated``), so that a client written
against them moves to Tessera by changing its base URL. Each is a thin alias of today's
use-case, with the older request and answer shapes; the rules are today's."""

from fastapi import Request

from tessera.auth.dependencies import CallerDep, project_router
from tessera.errors import ProductItemNotFound, concrete_paths_own_their_methods, responses
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
from tessera.mail.router import for_request
from tessera.products import repository as products_repository
from tessera.products import service as products
from tessera.products.schemas import ItemsIssue, RedeemRequest
from tessera.users import service as users

router = project_router("", tags=["older calls (Mufi)"])
concrete_paths_own_their_methods(router, "/products/create")  # not GET /products/{id}


@router.post(
    "/products/create",
    status_code=201,
    response_model=LegacyProductRead,
    responses=responses(400, 401, 403, 404, 409, 503),
    deprecated=True,
)
async def create_product(caller: CallerDep, body: LegacyProductCreate) -> LegacyProductRead:
    """Older ``POST /v1/products``: type ``redeemable_item`` (created as ``perks``)."""
    product = await products.create_product(
        caller.database, caller.principal, body=body.current(), chains=caller.chains
    )
    return LegacyProductRead.of(product)


@router.post(
    "/products/items/create",
    status_code=201,
    response_model=LegacyItems,
    responses=responses(400, 401, 403, 404, 409),
    deprecated=True,
)
async def create_product_items(
    request: Request, caller: CallerDep, body: LegacyItemsCreate
) -> LegacyItems:
    """Older ``POST /v1/products/{id}/items``: the product in the body, users by id."""
    items = await products.issue_items(
        caller.database,
        caller.principal,
        product_id=body.product_id,
        body=ItemsIssue(users=body.users),
        mail=for_request(request, caller.principal, caller.settings, caller.signers),
    )
    return LegacyItems(items=[LegacyItem.model_validate(item) for item in items])


@router.post(
    "/products/items/redeem",
    response_model=LegacyItem,
    responses=responses(400, 401, 403, 404, 409),
    deprecated=True,
)
async def redeem_product_item(caller: CallerDep, body: LegacyItemRedeem) -> LegacyItem:
    """Older ``POST /v1/products/{id}/items/redeem``: the item alone names its product."""
    product_id = await caller.database.read(
        products_repository.product_of_item, caller.principal.project_id, body.product_item_id
    )
    if product_id is None:
        raise ProductItemNotFound
    item, _ = await products.redeem_item(
        caller.database,
        caller.principal,
        product_id=product_id,
        body=RedeemRequest(product_item_id=body.product_item_id),
    )
    return LegacyItem.model_validate(item)


@router.post(
    "/user",
    status_code=201,
    response_model=LegacyUser,
    response_model_exclude_none=True,
    responses=responses(400, 401, 403, 409),
    deprecated=True,
)
async def create_user(
    caller: CallerDep,
    body: LegacyUserCreate,
) -> LegacyUser:
    """Oldest ``POST /v1/users/create``: one user (first and last name required), with its
    custodial wallet."""
    [user] = await users.create_users(
        caller.database,
        caller.principal,
        users=[body.current()],
        box=caller.box,
        ss58_prefix=caller.settings.ss58_prefix,
    )
    return LegacyUser.model_validate(user)
