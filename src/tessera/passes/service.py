"""Tickets in phone wallets: a ticket's Apple Wallet pass and Google Wallet link, and the
PassKit web service that keeps a pass current on the devices that registered it.

A device registers a pass with the token the pass carries (``apple.authentication_token``: the
item and its holder). It asks which of its passes changed since the tag it was given last
(the latest change of what a pass shows: the item, its product, its holder, its event, its
project and the project's logo; in microseconds) and fetches each: a reissued ticket's pass has the
new secret; after a transfer, the earlier holder's device gets the pass voided, without a code.
Tessera does not send the push that makes a device ask at once (docs/wallets.md): a device asks
when its pass is opened, and when the pass is pulled down to refresh.
"""

import asyncio
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from tessera.config import Settings
from tessera.db import Database, Rows, rerun_on_conflict
from tessera.errors import PassTokenInvalid, PassTypeNotFound, WalletNotConfigured
from tessera.models.base import utcnow
from tessera.passes import repository
from tessera.passes.apple import AppleWallet, authentication_token, pass_content, token_holds
from tessera.passes.facts import facts_of
from tessera.passes.google import GoogleWallet
from tessera.passes.images import checked_logo, pass_images
from tessera.projects.repository import get_project
from tessera.ticket_keys.service import Signers
from tessera.tickets.repository import TicketItem, TicketPageRow, ticket_item, ticket_page

APPLE_MISSING = (
    "Apple Wallet passes are not configured on this server: it needs TESSERA_APPLE_PASS_TYPE_ID, "
    "TESSERA_APPLE_TEAM_ID, TESSERA_APPLE_PASS_CERTIFICATE, TESSERA_APPLE_PASS_KEY and "
    "TESSERA_APPLE_WWDR_CERTIFICATE"
)
GOOGLE_MISSING = (
    "Google Wallet links are not configured on this server: it needs "
    "TESSERA_GOOGLE_WALLET_ISSUER_ID and TESSERA_GOOGLE_WALLET_KEY_FILE"
)


@dataclass(frozen=True, slots=True)
class Wallets:
    """The phone wallets the server is configured for (None: not configured)."""

    apple: AppleWallet | None
    google: GoogleWallet | None

    @classmethod
    def load(cls, settings: Settings) -> "Wallets":
        """Both wallets' files read and checked once, at start-up."""
        return cls(AppleWallet.load(settings), GoogleWallet.load(settings))

    def apple_wallet(self) -> AppleWallet:
        if self.apple is None:
            raise WalletNotConfigured(APPLE_MISSING)
        return self.apple

    def google_wallet(self) -> GoogleWallet:
        if self.google is None:
            raise WalletNotConfigured(GOOGLE_MISSING)
        return self.google


class PassFile(NamedTuple):
    """A signed ``.pkpass`` and when its ticket last changed (its Last-Modified)."""

    data: bytes
    modified: datetime


class Changed(NamedTuple):
    """The serial numbers of a device's passes that changed, and the tag to ask with next."""

    serials: list[str]
    tag: str


def web_service_url(base_url: str) -> str:
    """Where a pass's device reaches the PassKit web service (``passes.router``)."""
    return f"{base_url}/passkit"


async def ticket_pass(
    database: Database,
    wallet: AppleWallet,
    signers: Signers,
    *,
    hash_key: bytes,
    base_url: str,
    item: TicketItem,
    shown: TicketPageRow,
) -> PassFile:
    """The ticket's pass as its holder has it now: the current secret as its QR code."""
    signer = await signers.of(database, item.project_id)
    secret = signer.secret(item.id, item.ticket_version)
    logo = await database.read(repository.logo_of, item.project_id)
    content = pass_content(
        wallet,
        facts_of(item, shown, secret),
        web_service_url=web_service_url(base_url),
        token=authentication_token(hash_key, item.id, item.owner_id),
    )
    return await _packaged(wallet, content, logo, shown.changed_at)


async def google_link(
    database: Database,
    wallet: GoogleWallet,
    signers: Signers,
    *,
    item: TicketItem,
    shown: TicketPageRow,
) -> str:
    """The link that saves the ticket, with its current secret, to Google Wallet."""
    signer = await signers.of(database, item.project_id)
    secret = signer.secret(item.id, item.ticket_version)
    return wallet.save_url(
        facts_of(item, shown, secret),
        product_id=item.product_id,
        version=item.ticket_version,
    )


async def latest_pass(
    database: Database,
    wallet: AppleWallet,
    signers: Signers,
    *,
    hash_key: bytes,
    base_url: str,
    pass_type: str,
    serial: uuid.UUID,
    token: str,
) -> PassFile:
    """The pass ``serial`` as the device showing ``token`` should have it now: the holder's
    pass with the ticket's current secret; for a device of an earlier holder (the ticket was
    transferred since), the pass voided. Any other token: ``PassTokenInvalid``."""
    _check_type(wallet, pass_type)
    found = await database.read(_latest, serial, token, hash_key)
    item, shown, earlier_holder = found
    if earlier_holder is None:
        return await ticket_pass(
            database, wallet, signers, hash_key=hash_key, base_url=base_url, item=item, shown=shown
        )
    facts = facts_of(item, shown, None)._replace(holder=earlier_holder or None)
    content = pass_content(wallet, facts, web_service_url=web_service_url(base_url), token=token)
    logo = await database.read(repository.logo_of, item.project_id)
    return await _packaged(wallet, content, logo, shown.changed_at)


async def _latest(
    rows: Rows, serial: uuid.UUID, token: str, hash_key: bytes
) -> tuple[TicketItem, TicketPageRow, str | None]:
    """The item, its page, and None for its holder's token; an earlier holder's name ("" for
    none) for a token of theirs that a device registered."""
    item = await ticket_item(rows, serial)
    shown = None if item is None else await ticket_page(rows, item)
    if item is None or shown is None:
        raise PassTokenInvalid
    if token_holds(hash_key, item.id, item.owner_id, token):
        return item, shown, None
    for owner in await repository.registered_owners(rows, serial):
        if owner != item.owner_id and token_holds(hash_key, item.id, owner, token):
            return item, shown, await repository.holder_name(rows, owner) or ""
    raise PassTokenInvalid


async def _packaged(
    wallet: AppleWallet, content: dict[str, object], logo: bytes | None, modified: datetime
) -> PassFile:
    # In a thread: signing and zipping take a few milliseconds (scaling a new logo, more), too
    # long to hold the event loop.
    data = await asyncio.to_thread(_signed, wallet, content, logo)
    return PassFile(data, modified)


def _signed(wallet: AppleWallet, content: dict[str, object], logo: bytes | None) -> bytes:
    return wallet.package(content, pass_images(logo))


@rerun_on_conflict
async def register_device(
    database: Database,
    wallet: AppleWallet,
    *,
    hash_key: bytes,
    device: str,
    pass_type: str,
    serial: uuid.UUID,
    token: str,
    push_token: str,
) -> bool:
    """The device keeps the pass current, registered with its holder's token (any other:
    ``PassTokenInvalid``); whether the registration is new."""
    _check_type(wallet, pass_type)
    async with database.transaction() as tx:
        item = await ticket_item(tx, serial)
        if item is None or not token_holds(hash_key, item.id, item.owner_id, token):
            raise PassTokenInvalid
        created = await repository.register(
            tx, device=device, serial=serial, owner_id=item.owner_id, push_token=push_token
        )
        await tx.commit()
    return created


@rerun_on_conflict
async def unregister_device(
    database: Database,
    wallet: AppleWallet,
    *,
    hash_key: bytes,
    device: str,
    pass_type: str,
    serial: uuid.UUID,
    token: str,
) -> None:
    """The device stops keeping the pass (its pass was deleted), with the token of the
    holder it registered for, or of the current holder."""
    _check_type(wallet, pass_type)
    async with database.transaction() as tx:
        item = await ticket_item(tx, serial)
        owner = await repository.device_owner(tx, device, serial)
        owners = {o for o in (owner, item and item.owner_id) if o is not None}
        if not any(token_holds(hash_key, serial, o, token) for o in owners):
            raise PassTokenInvalid
        await repository.unregister(tx, device=device, serial=serial)
        await tx.commit()


async def changed_passes(
    database: Database, wallet: AppleWallet, *, device: str, pass_type: str, tag: str | None
) -> Changed | None:
    """The device's passes that changed since ``tag`` (every one without a tag, or with one
    this server did not give), with the tag to ask with next; None when none did."""
    _check_type(wallet, pass_type)
    since = _since(tag)
    kept = await database.read(repository.registered, device)
    changed = [one for one in kept if one.changed_at > since]
    if not changed:
        return None
    last = max(one.changed_at for one in changed)
    tag_now = (last - _EPOCH) // _MICROSECOND
    return Changed([str(one.serial) for one in changed], str(tag_now))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = datetime.resolution


def _since(tag: str | None) -> datetime:
    if tag is None or not tag.isdigit() or len(tag) > 18:
        return _EPOCH
    return _EPOCH + int(tag) * _MICROSECOND


def _check_type(wallet: AppleWallet, pass_type: str) -> None:
    if pass_type != wallet.pass_type_id:
        raise PassTypeNotFound


@rerun_on_conflict
async def set_logo(database: Database, *, project_id: uuid.UUID, png: bytes | None) -> None:
    """The project's passes show ``png`` (a PNG of at most 512 KiB, 4096 pixels a side;
    ``InvalidInput`` otherwise) as their icon and logo; None: Tessera's mark. The passes'
    devices see them changed (``changed_passes``)."""
    if png is not None:
        checked_logo(png)
    async with database.transaction() as tx:
        await get_project(tx, project_id)
        await repository.set_logo(tx, project_id, png, utcnow())
        await tx.commit()
