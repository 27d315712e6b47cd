"""The request and answer shapes of Mufi's older calls (mufi-openapi.yaml, ``deprecated``)."""

import uuid
from datetime import datetime
from typing import Literal, Self

from pydantic import ConfigDict, Field, field_validator

from tessera.config import Chain
from tessera.products.schemas import (
    MAX_ISSUE,
    MetadataUri,
    ProductCreate,
    ProductRead,
    Text255,
    mint_needs_uri_and_chain,
)
from tessera.schemas import (
    Bool,
    CamelInput,
    CamelModel,
    Email,
    PositiveInt,
    RefId,
    SnakeInput,
    SnakeModel,
    blank_allowed,
)
from tessera.users.schemas import Name, UserCreate, WalletRead

# The older page's only product type: an item to redeem, which today's types call a perk.
LEGACY_TYPE = "redeemable_item"
LEGACY_TYPE_IS = "perks"


class LegacyProductCreate(SnakeInput):
    """``POST /v1/products/create``: the older product body. ``redeemable_item`` is created as a
    ``perks`` product; every field the older page lacks takes today's default."""

    model_config = ConfigDict(json_schema_extra=mint_needs_uri_and_chain)

    type: Literal["redeemable_item"]
    name: Text255
    event_id: uuid.UUID | None = Field(
        default=None,
        description='"Leave blank for a general product": "" or null, no event.',
        json_schema_extra=blank_allowed,
    )
    description: Text255 | None = None
    metadata_uri: MetadataUri | None = None
    mint_nft: Bool = False
    chain: Chain | None = None
    max_items: PositiveInt | None = None

    @field_validator("event_id", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if value == "" else value

    def current(self) -> ProductCreate:
        return ProductCreate.model_validate(
            self.model_dump(exclude_unset=True) | {"type": LEGACY_TYPE_IS}
        )


class LegacyProductRead(ProductRead):
    """The product as the older page shows it: today's fields, with the older type."""

    type: Literal["redeemable_item"]

    @classmethod
    def of(cls, product: ProductRead) -> Self:
        return cls.model_validate(dict(product) | {"type": LEGACY_TYPE})


class LegacyItemsCreate(SnakeInput):
    """``POST /v1/products/items/create``: one item to each listed user."""

    product_id: uuid.UUID
    users: list[uuid.UUID] = Field(min_length=1, max_length=MAX_ISSUE)


class LegacyItemRedeem(SnakeInput):
    """``POST /v1/products/items/redeem``: the item alone names its product."""

    product_item_id: uuid.UUID


class LegacyItem(SnakeModel):
    """An item as the older calls show it (read from the item's row: its owner is the user)."""

    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    product_id: uuid.UUID
    item_id: int
    user_id: uuid.UUID = Field(validation_alias="owner_id")
    redeemed_at: int | None


class LegacyItems(SnakeModel):
    items: list[LegacyItem]


class LegacyUserCreate(CamelInput):
    """``POST /v1/user``: one user, first and last name required."""

    first_name: Name
    last_name: Name
    email: Email
    reference_id: RefId | None = None

    def current(self) -> UserCreate:
        return UserCreate.model_validate(self.model_dump())


class LegacyUser(CamelModel):
    """The oldest answer: the user and its wallets (``referenceId`` only when it has one)."""

    id: uuid.UUID
    first_name: str | None
    last_name: str | None
    email: str
    wallets: list[WalletRead]
    reference_id: str | None = None
