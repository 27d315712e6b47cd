"""ORM models; importing this package registers every table on ``Base.metadata``."""

from tessera.models.base import Base
from tessera.models.change import Change, DeliveryStatus, WebhookDelivery, WebhookEndpoint
from tessera.models.checkin import Checkin, CheckinKey
from tessera.models.claim import Claim, ClaimLink
from tessera.models.console import ConsoleSession, Operator
from tessera.models.event import Attendee, Event
from tessera.models.extrinsic import LIVE, Extrinsic, ExtrinsicStatus, MetricCount
from tessera.models.idempotency import IdempotencyKey
from tessera.models.job import Job, JobStatus
from tessera.models.mail import Mail, MailStatus
from tessera.models.order import Order, OrderItem, OrderStatus
from tessera.models.product import ItemTransfer, NftStatus, Product, ProductItem, Redemption
from tessera.models.project import (
    ApiKey,
    IdentityBinding,
    OAuthClient,
    Project,
    ProjectLogo,
    ProjectWallet,
    ProjectWalletBalance,
    SigningKey,
)
from tessera.models.rate import RateBucket, RateHit
from tessera.models.reconciliation import Reconciliation
from tessera.models.seat import HoldStatus, Seat, SeatHold
from tessera.models.user import ReputationEntry, User, UserWallet, WalletChallenge
from tessera.models.waiting import EntryStatus, WaitingEntry
from tessera.models.wallet_pass import PassRegistration
from tessera.models.worker import WorkerHeartbeat

__all__ = [
    "LIVE",
    "ApiKey",
    "Attendee",
    "Base",
    "Change",
    "Checkin",
    "CheckinKey",
    "Claim",
    "ClaimLink",
    "ConsoleSession",
    "DeliveryStatus",
    "EntryStatus",
    "Event",
    "Extrinsic",
    "ExtrinsicStatus",
    "HoldStatus",
    "IdempotencyKey",
    "IdentityBinding",
    "ItemTransfer",
    "Job",
    "JobStatus",
    "Mail",
    "MailStatus",
    "MetricCount",
    "NftStatus",
    "OAuthClient",
    "Operator",
    "Order",
    "OrderItem",
    "OrderStatus",
    "PassRegistration",
    "Product",
    "ProductItem",
    "Project",
    "ProjectLogo",
    "ProjectWallet",
    "ProjectWalletBalance",
    "RateBucket",
    "RateHit",
    "Reconciliation",
    "Redemption",
    "ReputationEntry",
    "Seat",
    "SeatHold",
    "SigningKey",
    "User",
    "UserWallet",
    "WaitingEntry",
    "WalletChallenge",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WorkerHeartbeat",
]
