import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, Protocol, Self

from pydantic import (
    MISSING,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    WithJsonSchema,
    computed_field,
    field_validator,
    model_validator,
)

from tessera.config import Chain
from tessera.events.schemas import EventRead
from tessera.models import NftStatus, OrderStatus, ProductItem, Redemption
from tessera.schemas import (
    NOT_NULL,
    Bool,
    Email,
    NonNegativeInt,
    PageParams,
    Pagination,
    PositiveInt,
    SnakeInput,
    SnakeModel,
    blank_allowed,
    requires_one_of,
    schema_rules,
)
from tessera.users.schemas import UserRef

if TYPE_CHECKING:
    from tessera.products.rows import Item, RedemptionRow

ProductType = Literal["admission", "presale", "perks"]
Text255 = Annotated[str, StringConstraints(min_length=1, max_length=255)]
Price = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,12}(\.[0-9]{1,2})?$")]
MetadataUri = Annotated[
    str,
    StringConstraints(max_length=512, pattern=r"^[a-zA-Z][a-zA-Z0-9+.-]*://[!-~]+$"),
]
MAX_ISSUE = 550


def _blank_is_none(value: object) -> object:
    """ "Leave blank for a general product": an empty string means no value."""
    return None if value == "" else value


# Fields that may have no value: null and "" mean none (an event, a limit: "unlimited").
OptionalEventId = Annotated[
    uuid.UUID | None, BeforeValidator(_blank_is_none), Field(json_schema_extra=blank_allowed)
]
OptionalLimit = Annotated[
    PositiveInt | None, BeforeValidator(_blank_is_none), Field(json_schema_extra=blank_allowed)
]


def missing_for_mint(product: Any) -> list[str]:
    """``mint_nft: true`` needs ``metadata_uri`` and ``chain``: a 400 line for each one missing
    (of a product to create, or of the values a product would have after an update)."""
    if not product.mint_nft:
        return []
    return [
        f"{name}: required when mint_nft is true"
        for name in ("metadata_uri", "chain")
        if getattr(product, name) is None
    ]


def mint_needs_uri_and_chain(schema: dict[str, Any]) -> None:
    """``mint_nft: true`` needs ``metadata_uri`` and ``chain`` (``missing_for_mint``)."""
    schema.setdefault("allOf", []).append(
        {
            "anyOf": [
                {"properties": {"mint_nft": {"const": False}}},
                {
                    "required": ["metadata_uri", "chain"],
                    "properties": {"metadata_uri": NOT_NULL, "chain": NOT_NULL},
                },
            ]
        }
    )


def is_fully_redeemed(redemption_count: int, product: Any) -> bool:
    """An item can be redeemed ``redemption_quantity`` times in all (the rule
    ``rules.check_redeemable`` enforces, and what the item shows)."""
    return bool(redemption_count >= product.redemption_quantity)


class ProductCreate(SnakeInput):
    model_config = ConfigDict(json_schema_extra=mint_needs_uri_and_chain)

    type: ProductType
    name: Text255
    event_id: OptionalEventId = None
    description: Text255 | None = None
    price: Price = "0"
    active: Bool = True
    is_claimable: Bool = False
    is_transferable: Bool = False
    stock: OptionalLimit = None
    redemption_quantity: PositiveInt = 1
    max_per_account: OptionalLimit = None
    min_rep_balance: NonNegativeInt = 0
    metadata_uri: MetadataUri | None = None
    mint_nft: Bool = False
    chain: Chain | None = None
    max_items: OptionalLimit = None

    def missing_for_mint(self) -> list[str]:
        return missing_for_mint(self)


MINT_NFT_UPDATE = (
    "`true` comes with `metadata_uri` and `chain`, as the schema says; a product that already "
    "stores both may be sent `true` without them (the stored ones count), which the schema cannot "
    "know. Switching NFTs on needs no item issued yet (409). Once the product's collection is "
    "queued or created, `mint_nft`, `chain`, `metadata_uri` and `max_items` cannot change (409)."
)


class ProductUpdate(SnakeInput):
    """The fields to change, with the types and bounds of ``ProductCreate``; the ones absent
    (``MISSING``) stay. ``null`` clears a field that may be empty and is refused for the others
    (the schema has no null there)."""

    model_config = ConfigDict(json_schema_extra=mint_needs_uri_and_chain)

    name: Text255 | MISSING = MISSING
    event_id: OptionalEventId | MISSING = MISSING
    description: Text255 | MISSING | None = MISSING
    price: Price | MISSING = MISSING
    active: Bool | MISSING = MISSING
    is_claimable: Bool | MISSING = MISSING
    is_transferable: Bool | MISSING = MISSING
    stock: OptionalLimit | MISSING = MISSING
    redemption_quantity: PositiveInt | MISSING = MISSING
    max_per_account: OptionalLimit | MISSING = MISSING
    min_rep_balance: NonNegativeInt | MISSING = MISSING
    metadata_uri: MetadataUri | MISSING | None = MISSING
    mint_nft: Bool | MISSING = Field(default=MISSING, description=MINT_NFT_UPDATE)
    chain: Chain | MISSING | None = MISSING
    max_items: OptionalLimit | MISSING = MISSING

    @field_validator(
        "name",
        "price",
        "active",
        "is_claimable",
        "is_transferable",
        "redemption_quantity",
        "min_rep_balance",
        "mint_nft",
        mode="before",
    )
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("may not be null")
        return value

    def changes(self) -> dict[str, Any]:
        """The fields sent, with their values (None clears)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class ProductNft(SnakeModel):
    chain: str
    collection_id: int | None
    status: NftStatus


class ProductRead(SnakeModel):
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
    event: EventRead | None
    nft_status: NftStatus | None = Field(default=None, exclude=True)
    nft_collection_id: int | None = Field(default=None, exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def nft(self) -> ProductNft | None:
        """The NFT collection of a ``mint_nft`` product: queued, submitted, created or failed."""
        if not self.mint_nft or self.chain is None:
            return None
        return ProductNft(
            chain=self.chain,
            collection_id=self.nft_collection_id,
            status=self.nft_status or NftStatus.QUEUED,
        )


class SaleRead(SnakeModel):
    id: uuid.UUID
    order_number: str
    order_status: OrderStatus
    product_name: str
    quantity: int
    unit_price: float
    user_id: uuid.UUID
    user_email: str
    user_first_name: str | None
    user_last_name: str | None
    created_at: datetime


class SaleList(SnakeModel):
    sales: list[SaleRead]
    pagination: Pagination


class ItemsIssue(SnakeInput):
    """Recipients by user id and/or email, one item per entry, at most 550 in all."""

    model_config = ConfigDict(json_schema_extra=requires_one_of("users", "emails", lists=True))

    product_id: uuid.UUID | None = Field(
        default=None, description="Optional (Mufi sends it); when sent, the path's id, else 400."
    )
    users: list[uuid.UUID] = Field(default_factory=list, max_length=MAX_ISSUE)
    emails: list[Email] = Field(default_factory=list, max_length=MAX_ISSUE)

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


class ItemSource(Protocol):
    """What ``item_view`` reads of an item: a ``product_items`` row (or ORM object) with its
    product and its owner."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def product_id(self) -> uuid.UUID: ...
    @property
    def item_id(self) -> int: ...
    @property
    def redemption_count(self) -> int: ...
    @property
    def redeemed_at(self) -> int | None: ...
    @property
    def nft_status(self) -> NftStatus | None: ...
    @property
    def nft_tx_hash(self) -> str | None: ...
    @property
    def nft_block(self) -> int | None: ...
    @property
    def nft_block_hash(self) -> str | None: ...
    @property
    def nft_reason(self) -> str | None: ...
    @property
    def nft_transfer_status(self) -> NftStatus | None: ...
    @property
    def nft_transfer_tx_hash(self) -> str | None: ...
    @property
    def nft_transfer_block(self) -> int | None: ...
    @property
    def nft_transfer_block_hash(self) -> str | None: ...
    @property
    def nft_transfer_reason(self) -> str | None: ...
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


def item_view(item: ItemSource, *, as_of: "Redemption | RedemptionRow | None" = None) -> ItemView:
    """An item (product and owner loaded) as ``ProductItemRead`` reads it, for a route to render
    or ``ProductItemRead.of`` to validate; ``as_of`` replays a recorded redemption."""
    product = item.product
    count = as_of.redemption_count if as_of else item.redemption_count
    nft = None
    if item.nft_status is not None:
        transfer = None
        if item.nft_transfer_status is not None:
            transfer = NftTransferView(
                status=item.nft_transfer_status,
                tx_hash=item.nft_transfer_tx_hash,
                block=item.nft_transfer_block,
                block_hash=item.nft_transfer_block_hash,
                reason=item.nft_transfer_reason,
            )
        nft = NftView(
            status=item.nft_status,
            tx_hash=item.nft_tx_hash,
            block=item.nft_block,
            block_hash=item.nft_block_hash,
            reason=item.nft_reason,
            transfer=transfer,
        )
    return ItemView(
        id=item.id,
        created_at=item.created_at,
        updated_at=item.updated_at,
        product_id=item.product_id,
        item_id=item.item_id,
        redemption_count=count,
        redemption_quantity=product.redemption_quantity,
        is_fully_redeemed=is_fully_redeemed(count, product),
        redeemed_at=as_of.redeemed_at if as_of else item.redeemed_at,
        user=item.owner,
        product=product,
        nft=nft,
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

    @classmethod
    def of(cls, item: "ProductItem | Item") -> Self:
        product = item.product
        return cls(
            id=item.id,
            item_id=item.item_id,
            product_id=product.id,
            product_name=product.name,
            product_type=product.type,
            redemption_count=item.redemption_count,
            redemption_quantity=product.redemption_quantity,
            is_fully_redeemed=is_fully_redeemed(item.redemption_count, product),
            redeemed_at=item.redeemed_at,
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
