"""Product use-cases: create, read, sales, issue items, redeem, transfer."""

import uuid

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload
from sqlalchemy.orm.attributes import set_committed_value

from tessera.auth.principal import Principal
from tessera.chain.gateway import ChainGateway, Deposits
from tessera.chain.keys import ss58_address
from tessera.chain.registry import Chains
from tessera.db import lock_for_update
from tessera.errors import (
    InsufficientCollectionBalance,
    InvalidInput,
    ItemFullyRedeemed,
    ItemNotOwnedBySender,
    ProductItemNotFound,
    ProductNotFound,
    ProductNotTransferable,
    TransferToSelf,
    UserNotFound,
)
from tessera.events.repository import get_event
from tessera.jobs.queue import (
    CREATE_COLLECTION,
    TRANSFER,
    collections_subject,
    enqueue,
    item_subject,
)
from tessera.models import (
    ItemTransfer,
    Order,
    OrderItem,
    Product,
    ProductItem,
    Redemption,
    User,
)
from tessera.models.base import unix_now
from tessera.products import issuance
from tessera.products.schemas import ItemsIssue, ProductCreate, RedeemRequest, TransferRequest
from tessera.projects.service import primary_wallet
from tessera.schemas import PageParams
from tessera.users.repository import get_user, users_by


async def create_product(
    session: AsyncSession, principal: Principal, *, body: ProductCreate, chains: Chains
) -> Product:
    """Create a product. ``mint_nft`` needs ``metadata_uri`` and ``chain`` (400), a configured
    chain (409), and a project wallet that can pay the collection deposit, the fee and keep its
    existential deposit (409 stating both amounts); the worker then creates the collection."""
    if problems := body.missing_for_mint():
        raise InvalidInput(*problems)
    event = None
    if body.event_id is not None:
        event = await get_event(session, principal.project_id, body.event_id)
    if body.mint_nft and body.chain:
        await _require_collection_balance(session, principal, chains, body)
    product = Product(
        id=uuid.uuid4(), project_id=principal.project_id, issued_count=0, **body.model_dump()
    )
    session.add(product)
    if product.mint_nft:
        product.nft_status = "queued"
        enqueue(
            session,
            project_id=principal.project_id,
            kind=CREATE_COLLECTION,
            subject=collections_subject(principal.project_id, product.chain or ""),
            payload={"product_id": str(product.id)},
        )
    await session.commit()
    set_committed_value(product, "event", event)
    return product


async def _require_collection_balance(
    session: AsyncSession, principal: Principal, chains: Chains, body: ProductCreate
) -> None:
    chain = chains.config(str(body.chain))
    wallet = await primary_wallet(session, principal.project_id)

    def read(gateway: ChainGateway) -> tuple[Deposits, int, int]:
        deposits = gateway.deposits()
        fee = gateway.create_collection_fee(wallet.public_key, max_supply=body.max_items)
        return deposits, fee, gateway.balance(wallet.public_key).free

    deposits, fee, available = await chains.run(chain.name, read, in_request=True)
    needed = deposits.collection + fee + deposits.existential
    if available < needed:
        raise InsufficientCollectionBalance(
            f"the project wallet {ss58_address(wallet.public_key, chain.ss58_prefix)} holds "
            f"{chain.amount(available)} on {chain.name}; creating the NFT collection needs "
            f"{chain.amount(needed)} (deposit {chain.amount(deposits.collection)}, fee "
            f"{chain.amount(fee)}, existential deposit {chain.amount(deposits.existential)})"
        )


async def list_products(
    session: AsyncSession, principal: Principal, *, paging: PageParams
) -> list[Product]:
    products = await session.scalars(
        select(Product)
        .where(Product.project_id == principal.project_id)
        .options(selectinload(Product.event))
        .order_by(Product.created_at, Product.id)
        .limit(paging.limit)
        .offset(paging.offset)
    )
    return list(products)


async def get_product(
    session: AsyncSession, principal: Principal, *, product_id: uuid.UUID
) -> Product:
    product = await session.scalar(
        select(Product)
        .where(Product.project_id == principal.project_id, Product.id == product_id)
        .options(selectinload(Product.event))
    )
    if product is None:
        raise ProductNotFound
    return product


async def list_sales(
    session: AsyncSession, principal: Principal, *, product_id: uuid.UUID, paging: PageParams
) -> tuple[Product, list[tuple[OrderItem, Order, User]], int]:
    """Order lines of a product (oldest first) with their order's status and buyer."""
    product = await session.scalar(
        select(Product).where(Product.project_id == principal.project_id, Product.id == product_id)
    )
    if product is None:
        raise ProductNotFound
    total = await session.scalar(
        select(func.count()).select_from(OrderItem).where(OrderItem.product_id == product.id)
    )
    rows = await session.execute(
        select(OrderItem, Order, User)
        .join(Order, OrderItem.order_id == Order.id)
        .join(User, Order.user_id == User.id)
        .where(OrderItem.product_id == product.id)
        .order_by(OrderItem.created_at, OrderItem.id)
        .limit(paging.limit)
        .offset(paging.offset)
    )
    return product, [tuple(row) for row in rows], total or 0


async def issue_items(
    session: AsyncSession, principal: Principal, *, product_id: uuid.UUID, body: ItemsIssue
) -> list[ProductItem]:
    """Give one item to each listed user (ids and/or emails), all or nothing."""
    if body.product_id is not None and body.product_id != product_id:
        raise InvalidInput("product_id: does not match the product in the path")
    product = await issuance.lock_product(session, principal.project_id, product_id)
    by_id, by_email = await users_by(
        session, principal.project_id, ids=body.users, emails=body.emails
    )
    missing = [str(i) for i in body.users if i not in by_id]
    missing += [e for e in body.emails if e not in by_email]
    if missing:
        raise UserNotFound(f"users not found in this project: {', '.join(missing[:5])}")
    recipients = [by_id[i] for i in body.users] + [by_email[e] for e in body.emails]
    items = await issuance.issue(session, product, recipients)
    await session.commit()
    return items


async def _locked_item(
    session: AsyncSession, principal: Principal, product: Product, item_id: uuid.UUID
) -> ProductItem:
    item = await session.scalar(
        lock_for_update(
            select(ProductItem).where(
                ProductItem.project_id == principal.project_id,
                ProductItem.product_id == product.id,
                ProductItem.id == item_id,
            )
        ).execution_options(populate_existing=True)
    )
    if item is None:
        raise ProductItemNotFound
    set_committed_value(item, "product", product)
    return item


async def redeem_item(
    session: AsyncSession, principal: Principal, *, product_id: uuid.UUID, body: RedeemRequest
) -> tuple[ProductItem, Redemption | None]:
    """Redeem an item once more, up to the product's ``redemption_quantity``.

    With a ``nonce``, a repeat of the same (item, nonce) counts once and returns the redemption
    recorded the first time (the second element of the result).
    """
    product = await get_product(session, principal, product_id=product_id)
    item = await _locked_item(session, principal, product, body.product_item_id)
    set_committed_value(item, "owner", await session.get(User, item.owner_id))
    if body.nonce is not None:
        earlier = await session.scalar(
            select(Redemption).where(Redemption.item_id == item.id, Redemption.nonce == body.nonce)
        )
        if earlier is not None:
            return item, earlier
    if item.redemption_count >= product.redemption_quantity:
        raise ItemFullyRedeemed
    now = unix_now()
    item.redemption_count += 1
    item.redeemed_at = now
    redemption = Redemption(
        item_id=item.id, nonce=body.nonce, redemption_count=item.redemption_count, redeemed_at=now
    )
    session.add(redemption)
    await session.commit()
    return item, redemption


async def transfer_item(
    session: AsyncSession, principal: Principal, *, product_id: uuid.UUID, body: TransferRequest
) -> tuple[ProductItem, User, User, int]:
    """Move an item from its owner to another user of the project.

    The product must be transferable; the sender must own the item; the item must not be fully
    redeemed; the recipient must be another user and pass the issuing rules (active product,
    ``max_per_account``, ``min_rep_balance``). Every transfer is kept in ``item_transfers``.
    """
    product = await issuance.lock_product(session, principal.project_id, product_id)
    if not product.is_transferable:
        raise ProductNotTransferable
    item = await _locked_item(session, principal, product, body.product_item_id)
    sender_id, recipient_id = body.sender(), body.recipient()
    assert sender_id is not None and recipient_id is not None
    sender = await get_user(session, principal.project_id, sender_id, label="sender")
    recipient = await get_user(session, principal.project_id, recipient_id, label="recipient")
    if item.owner_id != sender.id:
        raise ItemNotOwnedBySender
    if recipient.id == sender.id:
        raise TransferToSelf
    if item.redemption_count >= product.redemption_quantity:
        raise ItemFullyRedeemed
    await issuance.check_recipients(session, product, [recipient])

    transferred_at = unix_now()
    item.owner_id = recipient.id
    session.add(
        ItemTransfer(
            project_id=principal.project_id,
            item_id=item.id,
            from_user_id=sender.id,
            to_user_id=recipient.id,
            transferred_at=transferred_at,
        )
    )
    if product.mint_nft:
        item.nft_transfer_status = "queued"
        enqueue(
            session,
            project_id=principal.project_id,
            kind=TRANSFER,
            subject=item_subject(item.id),
            payload={
                "product_item_id": str(item.id),
                "from_user_id": str(sender.id),
                "to_user_id": str(recipient.id),
            },
        )
    await session.commit()
    return item, sender, recipient, transferred_at
