import uuid
from typing import Annotated

from fastapi import Query, Request

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.chain.registry import ChainsDep
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.mail.dependencies import for_request
from tessera.products import service
from tessera.products.item_schemas import (
    ItemFilter,
    ItemKey,
    ItemList,
    ItemsIssue,
    ItemsIssued,
    ItemTransferList,
    ProductItemRead,
    RedeemRequest,
    TransferRead,
    TransferRequest,
)
from tessera.products.rows import ProductView, SalePage
from tessera.products.schemas import ProductCreate, ProductRead, ProductUpdate, SaleList
from tessera.schemas import PageParams
from tessera.ticket_keys.dependencies import SignersDep
from tessera.users.schemas import UserPageLookup
from tessera.web.routes import concrete_paths_own_their_methods, project_router

router = project_router("/products", tags=["products"])
# Before GET /{id}/items/{item_id}, which would take GET .../items/redeem for an item "redeem".
concrete_paths_own_their_methods(router, "/{id}/items/redeem")


@router.post(
    "",
    status_code=201,
    response_model=ProductRead,
    responses=responses(400, 401, 403, 404, 409, 503),
)
async def create_product(
    principal: WriteAccess, database: DatabaseDep, chains: ChainsDep, body: ProductCreate
) -> ProductRead:
    """Create a product, optionally attached to an event and minting an NFT per item."""
    return await service.create_product(database, principal, body=body, chains=chains)


@router.get("", response_model=list[ProductRead], responses=responses(400, 401))
async def list_products(
    principal: ReadAccess, database: DatabaseDep, paging: Annotated[PageParams, Query()]
) -> list[ProductView]:
    """The project's products, oldest first (``page`` from 1, ``limit`` 1-100, default 20)."""
    return await service.list_products(database, principal, paging=paging)


@router.get("/{id}", response_model=ProductRead, responses=responses(400, 401, 404))
async def get_product(principal: ReadAccess, database: DatabaseDep, id: uuid.UUID) -> ProductView:
    """One product with its event."""
    return await service.get_product(database, principal, product_id=id)


@router.patch(
    "/{id}", response_model=ProductRead, responses=responses(400, 401, 403, 404, 409, 503)
)
async def update_product(
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    chains: ChainsDep,
    id: uuid.UUID,
    body: ProductUpdate,
) -> ProductRead:
    """Change the fields sent; ``null`` clears one that may be empty, ``{}`` changes nothing.
    ``stock`` may not go below the items issued and kept for waiting list offers, nor
    ``redemption_quantity`` below an item's ``redemption_count`` (409); see ``mint_nft`` for
    the NFT settings. Stock that comes back (a raise, the product switched on) is offered to
    the product's waiting list first."""
    return await service.update_product(
        database,
        principal,
        product_id=id,
        body=body,
        chains=chains,
        hash_key=settings.hash_key_bytes,
    )


@router.get("/{id}/sales", response_model=SaleList, responses=responses(400, 401, 404))
async def list_product_sales(
    principal: ReadAccess,
    database: DatabaseDep,
    id: uuid.UUID,
    paging: Annotated[PageParams, Query()],
) -> SalePage:
    """Order lines of the product, oldest first, with order status and unit price at order time."""
    return await service.list_sales(database, principal, product_id=id, paging=paging)


@router.post(
    "/{id}/items",
    status_code=201,
    response_model=ItemsIssued,
    responses=responses(400, 401, 403, 404, 409),
)
async def create_product_items(
    request: Request,
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    id: uuid.UUID,
    body: ItemsIssue,
) -> ItemsIssued:
    """Issue one item to each listed user (ids and/or emails, at most 550), all or nothing.
    When the project emails tickets, each user is emailed one link per item they got."""
    items = await service.issue_items(
        database,
        principal,
        product_id=id,
        body=body,
        mail=for_request(request, principal, settings, signers),
    )
    return ItemsIssued(items=[ProductItemRead.of(item) for item in items])


@router.post(
    "/{id}/items/redeem",
    response_model=ProductItemRead,
    responses=responses(400, 401, 403, 404, 409),
)
async def redeem_product_item(
    principal: WriteAccess, database: DatabaseDep, id: uuid.UUID, body: RedeemRequest
) -> ProductItemRead:
    """Redeem an item once; a repeated ``nonce`` returns the first result and counts once."""
    _, redeemed = await service.redeem_item(database, principal, product_id=id, body=body)
    return redeemed


@router.post(
    "/{id}/transfer", response_model=TransferRead, responses=responses(400, 401, 403, 404, 409)
)
async def transfer_product_item(
    request: Request,
    principal: WriteAccess,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    id: uuid.UUID,
    body: TransferRequest,
) -> TransferRead:
    """Transfer an item of a transferable product from its owner to another user. The new
    owner's ticket is new; when the project emails tickets, they are emailed its link."""
    return await service.transfer_item(
        database,
        principal,
        product_id=id,
        body=body,
        mail=for_request(request, principal, settings, signers),
    )


@router.get("/{id}/items", response_model=ItemList, responses=responses(400, 401, 404))
async def list_product_items(
    principal: ReadAccess,
    database: DatabaseDep,
    id: uuid.UUID,
    query: Annotated[ItemFilter, Query()],
) -> ItemList:
    """The product's items by ``item_id`` (``page`` from 1, ``limit`` 1-100, default 20); with
    ``owner_id`` and/or ``owner_email`` only those of that owner (both given, both must match)."""
    return await service.list_items(database, principal, product_id=id, query=query)


@router.get(
    "/{id}/items/{item_id}", response_model=ProductItemRead, responses=responses(400, 401, 404)
)
async def get_product_item(
    principal: ReadAccess, database: DatabaseDep, id: uuid.UUID, item_id: ItemKey
) -> ProductItemRead:
    """One item of the product, as the items list shows it (its owner, uses, NFT): ``item_id``
    names it either by its sequential ``item_id`` within the product (an integer) or by its
    ``id`` (a UUID), as an order's or a claim's answer gives them."""
    return await service.get_item(database, principal, product_id=id, item=item_id)


@router.get(
    "/{id}/items/{item_id}/transfers",
    response_model=ItemTransferList,
    responses=responses(400, 401, 404),
)
async def list_item_transfers(
    principal: ReadAccess,
    database: DatabaseDep,
    id: uuid.UUID,
    item_id: ItemKey,
    paging: Annotated[PageParams, Query()],
) -> ItemTransferList:
    """An item's transfers, oldest first (``page`` from 1, ``limit`` 1-100, default 20).
    ``item_id`` names the item either by its sequential ``item_id`` within the product (an
    integer) or by its ``id`` (a UUID)."""
    return await service.list_item_transfers(
        database, principal, product_id=id, item=item_id, paging=paging
    )


# Under /users, as the contract has it, but here: what a user holds are items.
holdings_router = project_router("/users", tags=["users"])


@holdings_router.post("/items", response_model=ItemList, responses=responses(400, 401, 404))
async def list_user_items(
    principal: ReadAccess, database: DatabaseDep, body: UserPageLookup
) -> ItemList:
    """The items a user owns now, of every product, oldest first (``page`` from 1, ``limit``
    1-100, default 20)."""
    return await service.list_holdings(database, principal, query=body)
