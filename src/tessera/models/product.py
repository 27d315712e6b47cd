import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from tessera.models.base import Base, IdMixin, TimestampMixin, UTCDateTime, Uuid, text_enum, utcnow
from tessera.models.event import Event
from tessera.models.user import User


class NftStatus(StrEnum):
    """Where a chain job stands, shown on its row.

    A collection goes queued -> submitted -> created; a mint queued -> submitted -> minted; an
    on-chain transfer queued -> submitted -> transferred. Each can end failed instead. An item
    whose NFT a reconciliation found in a wallet no user of the project holds is ``external``
    (``ProductItem.nft_held_by``) until its NFT comes back.
    """

    QUEUED = "queued"
    SUBMITTED = "submitted"
    CREATED = "created"
    MINTED = "minted"
    TRANSFERRED = "transferred"
    FAILED = "failed"
    EXTERNAL = "external"


class Product(IdMixin, TimestampMixin, Base):
    __tablename__ = "products"
    __table_args__ = (Index("ix_products_project_created", "project_id", "created_at", "id"),)

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    event_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("events.id", ondelete="RESTRICT"), index=True
    )
    type: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(String(255))
    price: Mapped[str] = mapped_column(String(32))
    active: Mapped[bool]
    is_claimable: Mapped[bool]
    is_transferable: Mapped[bool]
    stock: Mapped[int | None] = mapped_column(BigInteger)
    redemption_quantity: Mapped[int] = mapped_column(BigInteger)
    max_per_account: Mapped[int | None] = mapped_column(BigInteger)
    min_rep_balance: Mapped[int] = mapped_column(BigInteger)
    metadata_uri: Mapped[str | None] = mapped_column(String(512))
    mint_nft: Mapped[bool]
    chain: Mapped[str | None] = mapped_column(String(32))
    max_items: Mapped[int | None] = mapped_column(BigInteger)
    # A seated product sells the seats of this category of its event's plan, each through a hold.
    seat_category: Mapped[str | None] = mapped_column(String(64))
    # Items issued so far, which is also the last item_id: bumped under the product's row lock.
    issued_count: Mapped[int] = mapped_column(BigInteger, default=0)
    # mint_nft products: the collection the worker created (queued -> submitted -> created|failed).
    nft_status: Mapped[NftStatus | None] = mapped_column(text_enum(NftStatus))
    nft_collection_id: Mapped[int | None] = mapped_column(BigInteger)
    # The collection's creation as signed before it was submitted (``extrinsics``): a retry
    # follows it until its fate is known (tessera.products.nft_jobs).
    nft_extrinsic_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    # How long a waiting list offer stays open (None: a day, ``waiting.schemas.OFFER_SECONDS``).
    waiting_list_offer_seconds: Mapped[int | None] = mapped_column(BigInteger)
    # Stock kept for the waiting list's open offers, which nobody else may buy: raised as an
    # offer is made, lowered as it is claimed or expires, under the product's row lock. A
    # seated product keeps seats instead (the offer's seat hold).
    waiting_list_kept: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")

    event: Mapped[Event | None] = relationship(lazy="raise")


class ProductItem(IdMixin, TimestampMixin, Base):
    __tablename__ = "product_items"
    __table_args__ = (
        UniqueConstraint("product_id", "item_id"),
        Index("ix_product_items_product_owner", "product_id", "owner_id"),
        # No seat is sold twice, whatever the code above it does.
        Index("uq_product_items_seat_id", "seat_id", unique=True),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    product_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("products.id"))
    item_id: Mapped[int] = mapped_column(BigInteger)
    owner_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("users.id"), index=True)
    order_item_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("order_items.id"), index=True
    )
    redemption_count: Mapped[int] = mapped_column(BigInteger, default=0)
    redeemed_at: Mapped[int | None] = mapped_column(BigInteger)
    # NFT id = item_id. Mint: queued -> submitted -> minted|failed (minted once its block is
    # final); the last on-chain transfer: queued -> submitted -> transferred|failed.
    nft_status: Mapped[NftStatus | None] = mapped_column(text_enum(NftStatus))
    nft_tx_hash: Mapped[str | None] = mapped_column(String(80))
    nft_block: Mapped[int | None] = mapped_column(BigInteger)
    nft_transfer_status: Mapped[NftStatus | None] = mapped_column(text_enum(NftStatus))
    nft_transfer_tx_hash: Mapped[str | None] = mapped_column(String(80))
    nft_transfer_block: Mapped[int | None] = mapped_column(BigInteger)
    # The user wallet the NFT sits in, once minted (and after each on-chain transfer).
    nft_wallet_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, index=True)
    # nft_status "external": the public key (hex) of the wallet outside Tessera holding the NFT.
    nft_held_by: Mapped[str | None] = mapped_column(String(64))
    # The ticket's secret and page are derived from the item's id and this number
    # (tessera.ticket_keys.codes); a reissue or a transfer counts it up, and the old ones stop
    # working.
    ticket_version: Mapped[int] = mapped_column(BigInteger, default=1)
    # The extrinsics carrying its mint and its last on-chain transfer (``extrinsics``), and
    # the blocks they landed in.
    nft_extrinsic_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    nft_block_hash: Mapped[str | None] = mapped_column(String(66))
    nft_transfer_extrinsic_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    nft_transfer_block_hash: Mapped[str | None] = mapped_column(String(66))
    # Why the mint, or the transfer, waits or failed (e.g. the project wallet cannot pay).
    nft_reason: Mapped[str | None] = mapped_column(String(500))
    nft_transfer_reason: Mapped[str | None] = mapped_column(String(500))
    # A seated product's item: its seat, and the seat's name (which stays while it is sold).
    seat_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    seat_area: Mapped[str | None] = mapped_column(String(64))
    seat_row: Mapped[str | None] = mapped_column(String(32))
    seat_number: Mapped[str | None] = mapped_column(String(16))

    product: Mapped[Product] = relationship(lazy="raise")
    owner: Mapped[User] = relationship(lazy="raise")


class Redemption(IdMixin, Base):
    """One redemption of an item; a nonce makes a retried redemption count once."""

    __tablename__ = "redemptions"
    __table_args__ = (UniqueConstraint("item_id", "nonce"),)

    item_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("product_items.id"), index=True)
    nonce: Mapped[str | None] = mapped_column(String(128))
    redemption_count: Mapped[int] = mapped_column(BigInteger)
    redeemed_at: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ItemTransfer(IdMixin, Base):
    """Transfer history of product items."""

    __tablename__ = "item_transfers"

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    item_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("product_items.id"), index=True)
    from_user_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("users.id"))
    to_user_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("users.id"))
    transferred_at: Mapped[int] = mapped_column(BigInteger)
    # "api" (a transfer request, a claim) or "chain" (the item followed its NFT: a
    # reconciliation's repair).
    source: Mapped[str] = mapped_column(String(16), default="api")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
