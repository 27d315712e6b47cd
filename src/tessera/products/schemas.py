import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    MISSING,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    computed_field,
    field_validator,
)

from tessera.config import Chain
from tessera.events.schemas import EventRead
from tessera.models import NftStatus, OrderStatus
from tessera.schemas import (
    NOT_NULL,
    Bool,
    Integral,
    NonNegativeInt,
    Pagination,
    PositiveInt,
    SnakeInput,
    SnakeModel,
    blank_allowed,
)
from tessera.seats.schemas import Category
from tessera.waiting.schemas import MAX_OFFER_SECONDS, MIN_OFFER_SECONDS, OFFER_SECONDS

if TYPE_CHECKING:
    pass

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


def seated_needs_event(schema: dict[str, Any]) -> None:
    """A ``seat_category`` comes with its event's ``event_id`` (an update too: the schema
    cannot see a stored one)."""
    schema.setdefault("allOf", []).append(
        {
            "anyOf": [
                {"not": {"required": ["seat_category"]}},
                {"properties": {"seat_category": {"type": "null"}}},
                {
                    "required": ["event_id"],
                    "properties": {"event_id": {"type": "string", "format": "uuid"}},
                },
            ]
        }
    )


def product_rules(schema: dict[str, Any]) -> None:
    mint_needs_uri_and_chain(schema)
    seated_needs_event(schema)


def is_fully_redeemed(redemption_count: int, product: Any) -> bool:
    """An item can be redeemed ``redemption_quantity`` times in all (the rule
    ``rules.check_redeemable`` enforces, and what the item shows)."""
    return bool(redemption_count >= product.redemption_quantity)


SEAT_CATEGORY = (
    "A seated product: it sells the seats of this category of its event's seating plan, each "
    "through a hold (`hold_id`); its `stock` is at most their number, and their number when not "
    "given. Fixed, with `event_id`, once an item is issued or while a hold keeps seats for it."
)


OfferSeconds = Annotated[StrictInt, Field(ge=MIN_OFFER_SECONDS, le=MAX_OFFER_SECONDS), Integral]
OFFER_SECONDS_DESCRIPTION = (
    f"How long a waiting list offer of this product stays open, in seconds ({MIN_OFFER_SECONDS}"
    f" to {MAX_OFFER_SECONDS}); null or absent: {OFFER_SECONDS} (a day)."
)


def _none(value: object) -> bool:
    return value is None


class ProductCreate(SnakeInput):
    model_config = ConfigDict(json_schema_extra=product_rules)

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
    seat_category: Category | None = Field(default=None, description=SEAT_CATEGORY)
    waiting_list_offer_seconds: OfferSeconds | None = Field(
        default=None, description=OFFER_SECONDS_DESCRIPTION
    )

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

    model_config = ConfigDict(json_schema_extra=product_rules)

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
    seat_category: Category | MISSING | None = Field(default=MISSING, description=SEAT_CATEGORY)
    waiting_list_offer_seconds: OfferSeconds | MISSING | None = Field(
        default=MISSING, description=OFFER_SECONDS_DESCRIPTION
    )

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
    seat_category: str | None = Field(default=None, exclude_if=_none)  # seated products only
    waiting_list_offer_seconds: int | None = Field(default=None, exclude_if=_none)  # when set
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
