"""ORM models; importing this package registers every table on ``Base.metadata``."""

from tessera.models.base import Base
from tessera.models.event import Attendee, Event
from tessera.models.job import Job
from tessera.models.order import Order, OrderItem
from tessera.models.product import ItemTransfer, Product, ProductItem, Redemption
from tessera.models.project import (
    ApiKey,
    IdentityBinding,
    OAuthClient,
    Project,
    ProjectWallet,
    SigningKey,
)
from tessera.models.user import ReputationEntry, User, UserWallet

__all__ = [
    "ApiKey",
    "Attendee",
    "Base",
    "Event",
    "IdentityBinding",
    "ItemTransfer",
    "Job",
    "OAuthClient",
    "Order",
    "OrderItem",
    "Product",
    "ProductItem",
    "Project",
    "ProjectWallet",
    "Redemption",
    "ReputationEntry",
    "SigningKey",
    "User",
    "UserWallet",
]
