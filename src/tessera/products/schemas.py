import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    ConfigDict,
    Field,
    StringConstraints,
    computed_field,
    field_validator,
    model_validator,
)

from tessera.config import Chain
from tessera.events.schemas import EventRead
from tessera.models import NftStatus, OrderStatus, ProductItem, Redemption
from tessera.products.rules import is_fully_redeemed
from tessera.schemas import (
    NOT_NULL,
    Bool,
    Email,
    NonNegativeInt,
    Pagination,
    PositiveInt,
    SnakeInput,
    SnakeModel,
    blank_allowed,
    requires_one_of,
    schema_rules,
)
from tessera.users.schemas import UserRef

ProductType = Literal["admission", "presale", "perks"]
Text255 = Annotated[str, StringConstraints(min_length=1, max_length=255)]
Price = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,12}(\.[0-9]{1,2})?$")]
MetadataUri = Annotated[
    str,
    StringConstraints(max_length=512, pattern=r"^[a-zA-Z][a-zA-Z0-9+.-]*://[!-~]+$"),
]
MAX_ISSUE = 550


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


class ProductCreate(SnakeInput):
    model_config = ConfigDict(json_schema_extra=mint_needs_uri_and_chain)

    type: ProductType
    name: Text255
    event_id: uuid.UUID | None = Field(default=None, json_schema_extra=blank_allowed)
    description: Text255 | None = None
    price: Price = "0"
    active: Bool = True
    is_claimable: Bool = False
    is_transferable: Bool = False
    stock: PositiveInt | None = Field(default=None, json_schema_extra=blank_allowed)
    redemption_quantity: PositiveInt = 1
    max_per_account: PositiveInt | None = Field(default=None, json_schema_extra=blank_allowed)
    min_rep_balance: NonNegativeInt = 0
    metadata_uri: MetadataUri | None = None
    mint_nft: Bool = False
    chain: Chain | None = None
    max_items: PositiveInt | None = Field(default=None, json_schema_extra=blank_allowed)

    @field_validator("event_id", "max_items", "stock", "max_per_account", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        """ "Leave blank for a general product": an empty string means no value."""
        return None if value == "" else value

    def missing_for_mint(self) -> list[str]:
        if not self.mint_nft:
            return []
        return [
            f"{name}: required when mint_nft is true"
            for name in ("metadata_uri", "chain")
            if getattr(self, name) is None
        ]


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


class ItemNft(SnakeModel):
    """The item's NFT (id = ``item_id``): queued, submitted, minted or failed; and the last
    on-chain transfer: queued, submitted, transferred or failed."""

    status: NftStatus
    tx_hash: str | None
    block: int | None
    transfer: NftTransfer | None

    @classmethod
    def of(cls, item: ProductItem | Any) -> Self | None:
        if item.nft_status is None:
            return None
        transfer = None
        if item.nft_transfer_status is not None:
            transfer = NftTransfer(
                status=item.nft_transfer_status,
                tx_hash=item.nft_transfer_tx_hash,
                block=item.nft_transfer_block,
            )
        return cls(
            status=item.nft_status,
            tx_hash=item.nft_tx_hash,
            block=item.nft_block,
            transfer=transfer,
        )


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
    def of(cls, item: ProductItem | Any, *, as_of: Redemption | None = None) -> Self:
        """Render an item (product and owner loaded); ``as_of`` replays a recorded redemption."""
        product = item.product
        count = as_of.redemption_count if as_of else item.redemption_count
        return cls(
            id=item.id,
            created_at=item.created_at,
            updated_at=item.updated_at,
            product_id=item.product_id,
            item_id=item.item_id,
            redemption_count=count,
            redemption_quantity=product.redemption_quantity,
            is_fully_redeemed=is_fully_redeemed(count, product),
            redeemed_at=as_of.redeemed_at if as_of else item.redeemed_at,
            user=ItemOwner.model_validate(item.owner),
            product=ItemProduct.model_validate(product),
            nft=ItemNft.of(item),
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
    def of(cls, item: ProductItem) -> Self:
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
