"""The typed rows of products and their items that the repository returns, and the views
built from them (what ``ProductRead`` and ``ProductItemRead`` read)."""

import uuid
from datetime import datetime
from decimal import Decimal
from typing import NamedTuple, Protocol

from tessera.db import Joined
from tessera.events.repository import EventRow
from tessera.models import (
    NftStatus,
    OrderStatus,
)
from tessera.schemas import Pagination


class ProductRow(NamedTuple):
    """A product's whole row (``products``)."""

    project_id: uuid.UUID
    event_id: uuid.UUID | None
    type: str
    name: str
    description: str | None
    price: str
    active: bool
    is_claimable: bool
    is_transferable: bool
    stock: int | None
    redemption_quantity: int
    max_per_account: int | None
    min_rep_balance: int
    metadata_uri: str | None
    mint_nft: bool
    chain: str | None
    max_items: int | None
    seat_category: str | None
    issued_count: int
    nft_status: NftStatus | None
    nft_collection_id: int | None
    nft_extrinsic_id: uuid.UUID | None
    waiting_list_offer_seconds: int | None
    waiting_list_kept: int
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class ProductReadRow(NamedTuple):
    """The columns of a product that ``ProductRead`` shows."""

    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    type: str
    name: str
    event_id: uuid.UUID | None
    description: str | None
    price: str
    active: bool
    is_claimable: bool
    is_transferable: bool
    stock: int | None
    redemption_quantity: int
    max_per_account: int | None
    min_rep_balance: int
    metadata_uri: str | None
    mint_nft: bool
    chain: str | None
    max_items: int | None
    nft_status: NftStatus | None
    nft_collection_id: int | None
    seat_category: str | None
    waiting_list_offer_seconds: int | None


class ProductEventRow(NamedTuple):
    """``ProductReadRow``'s columns and the product's event's (``EventRow``'s, as
    ``event__<key>``): all None when the product has no event (``event_id``)."""

    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    type: str
    name: str
    event_id: uuid.UUID | None
    description: str | None
    price: str
    active: bool
    is_claimable: bool
    is_transferable: bool
    stock: int | None
    redemption_quantity: int
    max_per_account: int | None
    min_rep_balance: int
    metadata_uri: str | None
    mint_nft: bool
    chain: str | None
    max_items: int | None
    nft_status: NftStatus | None
    nft_collection_id: int | None
    seat_category: str | None
    waiting_list_offer_seconds: int | None
    event__project_id: uuid.UUID
    event__name: str
    event__description: str | None
    event__start_date: int
    event__end_date: int
    event__location: str
    event__address: str
    event__reference_id: str | None
    event__id: uuid.UUID
    event__created_at: datetime
    event__updated_at: datetime


class ProductView(NamedTuple):
    """A product with its event, as ``ProductRead`` shows it."""

    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    type: str
    name: str
    event_id: uuid.UUID | None
    description: str | None
    price: str
    active: bool
    is_claimable: bool
    is_transferable: bool
    stock: int | None
    redemption_quantity: int
    max_per_account: int | None
    min_rep_balance: int
    metadata_uri: str | None
    mint_nft: bool
    chain: str | None
    max_items: int | None
    nft_status: NftStatus | None
    nft_collection_id: int | None
    seat_category: str | None
    waiting_list_offer_seconds: int | None
    event: EventRow | None


def product_view(
    product: ProductRow | ProductReadRow | ProductEventRow, event: EventRow | None
) -> ProductView:
    """``product`` with ``event`` (the one its ``event_id`` names), for ``ProductRead``: the
    columns of a ``ProductReadRow`` (which a ``ProductEventRow`` starts with) and the event."""
    if isinstance(product, ProductReadRow):
        return ProductView._make((*product, event))
    if isinstance(product, ProductEventRow):
        return ProductView._make((*product[:_SHOWN], event))
    return ProductView._make((*(getattr(product, name) for name in _SHOWN_FIELDS), event))


# ``ProductView`` is ``ProductReadRow``'s fields and the event, and ``ProductEventRow`` starts
# with them (tests/db/test_row_types.py holds both): a view is made from the columns as they come.
_SHOWN_FIELDS = ProductReadRow._fields
_SHOWN = len(_SHOWN_FIELDS)


def event_of(row: ProductEventRow) -> EventRow:
    """The event of a product that has one, read with it (``ProductEventRow``)."""
    return EventRow(
        project_id=row.event__project_id,
        name=row.event__name,
        description=row.event__description,
        start_date=row.event__start_date,
        end_date=row.event__end_date,
        location=row.event__location,
        address=row.event__address,
        reference_id=row.event__reference_id,
        id=row.event__id,
        created_at=row.event__created_at,
        updated_at=row.event__updated_at,
    )


# Sales: a product's order lines.
class SaleRow(NamedTuple):
    """An order line of the product, as ``SaleRead`` shows it, and the product's sales."""

    total: int
    id: uuid.UUID
    order_number: str
    order_status: OrderStatus
    product_name: str
    quantity: int
    unit_price: Decimal
    user_id: uuid.UUID
    user_email: str
    user_first_name: str | None
    user_last_name: str | None
    created_at: datetime


class SalePage(NamedTuple):
    """A page of a product's sales, as ``SaleList`` shows it."""

    sales: list[SaleRow]
    pagination: Pagination


# Items, with their product and their owner as ``ItemOwner`` shows it.
class ItemRow(NamedTuple):
    """An item's whole row (``product_items``)."""

    project_id: uuid.UUID
    product_id: uuid.UUID
    item_id: int
    owner_id: uuid.UUID
    order_item_id: uuid.UUID | None
    redemption_count: int
    redeemed_at: int | None
    nft_status: NftStatus | None
    nft_tx_hash: str | None
    nft_block: int | None
    nft_transfer_status: NftStatus | None
    nft_transfer_tx_hash: str | None
    nft_transfer_block: int | None
    nft_wallet_id: uuid.UUID | None
    nft_held_by: str | None
    ticket_version: int
    nft_extrinsic_id: uuid.UUID | None
    nft_block_hash: str | None
    nft_transfer_extrinsic_id: uuid.UUID | None
    nft_transfer_block_hash: str | None
    nft_reason: str | None
    nft_transfer_reason: str | None
    seat_id: uuid.UUID | None
    seat_area: str | None
    seat_row: str | None
    seat_number: str | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class OwnerNames(NamedTuple):
    """What ``ItemOwner`` shows of an item's owner besides its id (the item's ``owner_id``)."""

    email: str
    first_name: str | None
    last_name: str | None


class OwnedItemRow(NamedTuple):
    """A join: an item's row and its owner's names (``OWNED_ITEM`` reads it)."""

    item: ItemRow
    owner: OwnerNames


OWNED_ITEM = Joined(OwnedItemRow)


class Owner(Protocol):
    """A user as an item shows its owner (``ItemOwner``): a user's row, or an ``OwnerRow``."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def email(self) -> str: ...
    @property
    def first_name(self) -> str | None: ...
    @property
    def last_name(self) -> str | None: ...


class Recipient(Owner, Protocol):
    """A user about to receive items (``rules.check_recipients``)."""

    @property
    def is_activated(self) -> bool: ...
    @property
    def reputation(self) -> int: ...


class OwnerRow(NamedTuple):
    """What ``ItemOwner`` shows of a user."""

    id: uuid.UUID
    email: str
    first_name: str | None
    last_name: str | None


class Item(NamedTuple):
    """An item's row with its product and its owner, as ``ProductItemRead`` reads it."""

    row: ItemRow
    product: ProductRow
    owner: Owner


def owned_item(row: OwnedItemRow, product: ProductRow) -> Item:
    """The item of ``row`` with its ``product`` and the owner the row carries."""
    owner = OwnerRow(row.item.owner_id, *row.owner)
    return Item(row.item, product, owner)


class HeldRow(NamedTuple):
    owner_id: uuid.UUID
    held: int


# Redemptions and transfers.
class RedemptionRow(NamedTuple):
    """A redemption's whole row (``redemptions``)."""

    item_id: uuid.UUID
    nonce: str | None
    redemption_count: int
    redeemed_at: int
    created_at: datetime
    id: uuid.UUID


class HolderRow(NamedTuple):
    custody: str
    address: str


class ItemKeyRow(NamedTuple):
    """A product's id, and its item's (None: no such item in it)."""

    id: uuid.UUID
    item: uuid.UUID | None


class TransferRow(NamedTuple):
    """A transfer of an item, with what ``ItemOwner`` shows of its sender (``from_<key>``) and
    its recipient (``to_<key>``)."""

    id: uuid.UUID
    transferred_at: int
    source: str
    from_id: uuid.UUID
    from_email: str
    from_first_name: str | None
    from_last_name: str | None
    to_id: uuid.UUID
    to_email: str
    to_first_name: str | None
    to_last_name: str | None


# The console's product pages (``tessera.console.products``): what the API has no use-case for.
class ProductCounts(NamedTuple):
    id: uuid.UUID
    issued: int
    redeemed: int  # items redeemed at least once
    redemptions: int


class NftProgress(NamedTuple):
    """Where a product's items' NFTs stand: their mints by status, the queued ones that wait
    for the project wallet to be funded (and the reason of one of them), and their transfers
    on chain (submitted: in an extrinsic not yet in a final block)."""

    minted: int
    submitted: int
    queued: int
    failed: int
    external: int
    mints_waiting_for_funds: int
    mint_funds_reason: str | None
    transfers_submitted: int
    transfers_queued: int
    transfers_waiting_for_funds: int
    transfer_funds_reason: str | None


class EventChoice(NamedTuple):
    id: uuid.UUID
    name: str


class DaySold(NamedTuple):
    day: str  # YYYY-MM-DD, in UTC
    quantity: int
