"""What the API takes and answers of items: issuing, the item as it is read, redeeming,
transferring, and their lists."""

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Literal, NamedTuple, Protocol, Self

from pydantic import (
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from tessera.models import NftStatus, Redemption
from tessera.schemas import (
    Email,
    PageParams,
    Pagination,
    SnakeInput,
    SnakeModel,
    requires_one_of,
    schema_rules,
)
from tessera.seats.rules import SeatView, seat_of
from tessera.seats.schemas import SeatRef
from tessera.users.schemas import UserRef

if TYPE_CHECKING:
    from tessera.products.rows import ItemRow, RedemptionRow

from tessera.products.schemas import MAX_ISSUE, ProductRead, is_fully_redeemed


class ItemsIssue(SnakeInput):
    """Recipients by user id and/or email, one item per entry, at most 550 in all."""

    model_config = ConfigDict(json_schema_extra=requires_one_of("users", "emails", lists=True))

    product_id: uuid.UUID | None = Field(
        default=None, description="Optional (Mufi sends it); when sent, the path's id, else 400."
    )
    users: list[uuid.UUID] = Field(default_factory=list, max_length=MAX_ISSUE)
    emails: list[Email] = Field(default_factory=list, max_length=MAX_ISSUE)
    hold_id: uuid.UUID | None = Field(
        default=None,
        description="A seated product's items: the hold whose seats they get, one per "
        "recipient in the order listed (users, then emails), in the plan's order.",
    )

    @model_validator(mode="after")
    def _recipients(self) -> Self:
        count = len(self.users) + len(self.emails)
        if count == 0:
            raise ValueError("at least one of users or emails is required")
        if count > MAX_ISSUE:
            raise ValueError(f"at most {MAX_ISSUE} recipients in all (users + emails), got {count}")
        return self


class ItemOwner(SnakeModel):
    id: uuid.UUID
    email: str
    first_name: str | None
    last_name: str | None


class ItemProduct(SnakeModel):
    id: uuid.UUID
    name: str
    type: str
    redemption_quantity: int


class NftTransfer(SnakeModel):
    status: NftStatus
    tx_hash: str | None
    block: int | None
    block_hash: str | None
    reason: str | None


class ItemNft(SnakeModel):
    """The item's NFT (id = ``item_id``): queued, submitted (signed and sent), minted (its
    block is final: ``block``, ``block_hash``) or failed; and the last on-chain transfer:
    queued, submitted, transferred or failed. ``reason``: why it waits (the project wallet
    cannot pay yet) or why it failed, else null."""

    status: NftStatus
    tx_hash: str | None
    block: int | None
    block_hash: str | None
    reason: str | None
    transfer: NftTransfer | None


class ProductItemRead(SnakeModel):
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    product_id: uuid.UUID
    item_id: int
    redemption_count: int
    redemption_quantity: int
    is_fully_redeemed: bool
    redeemed_at: int | None
    user: ItemOwner
    product: ItemProduct
    nft: ItemNft | None
    seat: SeatRef | None = Field(default=None, exclude_if=lambda seat: seat is None)

    @classmethod
    def of(cls, item: "ItemSource", *, as_of: "Redemption | RedemptionRow | None" = None) -> Self:
        """Render an item (product and owner loaded); ``as_of`` replays a recorded redemption."""
        return cls.model_validate(item_view(item, as_of=as_of))


class OwnerSource(Protocol):
    """An item's owner as the answer shows it (``ItemOwner``): a user's row or object."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def email(self) -> str: ...
    @property
    def first_name(self) -> str | None: ...
    @property
    def last_name(self) -> str | None: ...


class ProductSource(Protocol):
    """An item's product as the answer shows it (``ItemProduct``)."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def redemption_quantity(self) -> int: ...


class TransferSource(Protocol):
    """What ``TransferItem`` reads of an item: its ``product_items`` row with its product."""

    @property
    def row(self) -> "ItemRow": ...
    @property
    def product(self) -> ProductSource: ...


class ItemSource(Protocol):
    """What ``item_view`` reads of an item: its ``product_items`` row with its product and its
    owner (``products.rows.Item``, and the joins that read one whole)."""

    @property
    def row(self) -> "ItemRow": ...
    @property
    def product(self) -> ProductSource: ...
    @property
    def owner(self) -> OwnerSource: ...


class NftTransferView(NamedTuple):
    """An item's last on-chain transfer as ``NftTransfer`` reads it."""

    status: NftStatus
    tx_hash: str | None
    block: int | None
    block_hash: str | None
    reason: str | None


class NftView(NamedTuple):
    """An item's NFT as ``ItemNft`` reads it."""

    status: NftStatus
    tx_hash: str | None
    block: int | None
    block_hash: str | None
    reason: str | None
    transfer: NftTransferView | None


class ItemView(NamedTuple):
    """An item as ``ProductItemRead`` reads it."""

    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    product_id: uuid.UUID
    item_id: int
    redemption_count: int
    redemption_quantity: int
    is_fully_redeemed: bool
    redeemed_at: int | None
    user: OwnerSource
    product: ProductSource
    nft: NftView | None
    seat: SeatView | None


def item_view(item: ItemSource, *, as_of: "Redemption | RedemptionRow | None" = None) -> ItemView:
    """An item (product and owner loaded) as ``ProductItemRead`` reads it, for a route to render
    or ``ProductItemRead.of`` to validate; ``as_of`` replays a recorded redemption."""
    product, row = item.product, item.row
    count = as_of.redemption_count if as_of else row.redemption_count
    nft = None
    if row.nft_status is not None:
        transfer = None
        if row.nft_transfer_status is not None:
            transfer = NftTransferView(
                status=row.nft_transfer_status,
                tx_hash=row.nft_transfer_tx_hash,
                block=row.nft_transfer_block,
                block_hash=row.nft_transfer_block_hash,
                reason=row.nft_transfer_reason,
            )
        nft = NftView(
            status=row.nft_status,
            tx_hash=row.nft_tx_hash,
            block=row.nft_block,
            block_hash=row.nft_block_hash,
            reason=row.nft_reason,
            transfer=transfer,
        )
    return ItemView(
        id=row.id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        product_id=row.product_id,
        item_id=row.item_id,
        redemption_count=count,
        redemption_quantity=product.redemption_quantity,
        is_fully_redeemed=is_fully_redeemed(count, product),
        redeemed_at=as_of.redeemed_at if as_of else row.redeemed_at,
        user=item.owner,
        product=product,
        nft=nft,
        seat=seat_of(row),
    )


class NftFailure(SnakeModel):
    """The ``data`` of an ``nft.failed`` change: the job that gave up, its last error, and the
    product (a collection) or the item (a mint or a transfer) as the API shows it."""

    job: str
    error: str
    product: ProductRead | None = Field(default=None, exclude_if=lambda value: value is None)
    product_item: ProductItemRead | None = Field(
        default=None, exclude_if=lambda value: value is None
    )


class ItemsIssued(SnakeModel):
    items: list[ProductItemRead]


class RedeemRequest(SnakeInput):
    product_item_id: uuid.UUID
    nonce: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None


class TransferRequest(SnakeInput):
    """Sender and recipient each by email or user id (email first when both are given)."""

    model_config = ConfigDict(
        json_schema_extra=schema_rules(
            requires_one_of("sender_email", "sender_user_id"),
            requires_one_of("recipient_email", "recipient_user_id"),
        )
    )

    product_item_id: uuid.UUID
    sender_email: Email | None = None
    sender_user_id: uuid.UUID | None = None
    recipient_email: Email | None = None
    recipient_user_id: uuid.UUID | None = None

    @model_validator(mode="after")
    def _parties(self) -> Self:
        for party, ref in (("sender", self._sender()), ("recipient", self._recipient())):
            if ref is None:
                raise ValueError(f"one of {party}_email or {party}_user_id is required")
        return self

    def _sender(self) -> UserRef | None:
        return UserRef.first(email=self.sender_email, id=self.sender_user_id)

    def _recipient(self) -> UserRef | None:
        return UserRef.first(email=self.recipient_email, id=self.recipient_user_id)

    def sender(self) -> UserRef:
        ref = self._sender()
        assert ref is not None  # the validator requires one
        return ref

    def recipient(self) -> UserRef:
        ref = self._recipient()
        assert ref is not None  # the validator requires one
        return ref


class TransferItem(SnakeModel):
    id: uuid.UUID
    item_id: int
    product_id: uuid.UUID
    product_name: str
    product_type: str
    redemption_count: int
    redemption_quantity: int
    is_fully_redeemed: bool
    redeemed_at: int | None
    seat: SeatRef | None = Field(default=None, exclude_if=lambda seat: seat is None)

    @classmethod
    def of(cls, item: "TransferSource") -> Self:
        product, row = item.product, item.row
        seat = seat_of(row)
        return cls(
            id=row.id,
            item_id=row.item_id,
            product_id=product.id,
            product_name=product.name,
            product_type=product.type,
            redemption_count=row.redemption_count,
            redemption_quantity=product.redemption_quantity,
            is_fully_redeemed=is_fully_redeemed(row.redemption_count, product),
            redeemed_at=row.redeemed_at,
            seat=None if seat is None else SeatRef(**seat._asdict()),
        )


class TransferRead(SnakeModel):
    product_item: TransferItem
    previous_owner: ItemOwner
    new_owner: ItemOwner
    transferred_at: int


class ItemList(SnakeModel):
    items: list[ProductItemRead]
    pagination: Pagination


class ItemFilter(PageParams):
    """A page of a product's items, optionally only those of one owner."""

    owner_id: uuid.UUID | None = None
    owner_email: Email | None = Field(default=None, description="Compared lowercased.")


MAX_ITEM_ID = 2**53


def _item_key(value: object) -> int | uuid.UUID:
    """An item's sequential ``item_id`` (digits) or its ``id`` (a UUID)."""
    text = str(value)
    if text.isascii() and text.isdigit() and len(text) <= len(str(MAX_ITEM_ID)):
        if 1 <= (number := int(text)) <= MAX_ITEM_ID:
            return number
    else:
        try:
            return uuid.UUID(text)
        except ValueError:
            pass
    raise ValueError(f"must be an item_id (an integer from 1 to {MAX_ITEM_ID}) or the item's id")


# One rule and one message rather than a union's error per branch.
ItemKey = Annotated[
    int | uuid.UUID,
    PlainValidator(_item_key),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": MAX_ITEM_ID},
                {"type": "string", "format": "uuid"},
            ]
        }
    ),
]


class ItemTransferRead(SnakeModel):
    id: uuid.UUID
    from_user: ItemOwner
    to_user: ItemOwner
    transferred_at: int
    source: Literal["api", "chain"] = Field(
        description="`api`: a transfer request; `chain`: the item followed its NFT, moved on "
        "chain from a wallet its user holds (a reconciliation's repair)."
    )


class ItemTransferList(SnakeModel):
    transfers: list[ItemTransferRead]
    pagination: Pagination
