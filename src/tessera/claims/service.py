"""Claim-link use-cases: links for a project (create, list, get, revoke), and the public side:
the view of what a link offers and the claim itself."""

import uuid

from sqlalchemy.exc import IntegrityError

from tessera.auth.principal import Principal
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.claims import repository
from tessera.claims.repository import LinkRow, OfferRow
from tessera.claims.schemas import (
    ClaimedEvent,
    ClaimLinkCreate,
    ClaimLinkCreated,
    ClaimLinkList,
    ClaimLinkRead,
    ClaimRequest,
    ClaimResult,
    ClaimView,
    LinkStatus,
    link_status,
)
from tessera.config import Settings
from tessera.db import Database, rerun_on_conflict
from tessera.errors import (
    ClaimLinkClosed,
    ClaimLinkNotFound,
    ClaimNotForYou,
    InvalidInput,
    MailNotConfigured,
    ProductNotClaimable,
    ProductNotFound,
    ReferenceIdTaken,
)
from tessera.idempotency.schemas import KeyScope
from tessera.mail import repository as mails
from tessera.mail import service as outbox
from tessera.mail.letters import Kind
from tessera.mail.service import TicketMail, tickets_of
from tessera.models.base import unix_now, utcnow
from tessera.models.claim import new_link_token
from tessera.products import rules
from tessera.products.item_schemas import TransferItem, TransferSource
from tessera.products.repository import get_product_row
from tessera.schemas import PageParams, Pagination
from tessera.ticket_keys import codes as ticket_codes
from tessera.toolkit.crypto import SecretBox, keyed_hash
from tessera.users.schemas import UserCreate
from tessera.users.service import find_or_create_user, new_user
from tessera.waiting import rules as waiting


def token_digest(hash_key: bytes, token: str) -> str:
    return keyed_hash(hash_key, token)


@rerun_on_conflict
async def create_link(
    database: Database,
    principal: Principal,
    *,
    product_id: uuid.UUID,
    body: ClaimLinkCreate,
    hash_key: bytes,
    base_url: str,
    mail: TicketMail | None = None,
) -> ClaimLinkCreated:
    """A link for an ``is_claimable`` product that sells no seats (409 otherwise),
    ``expires_at`` in the future (400), ``reference_id`` unique in the project (409). The token
    is in this answer only, and in the invitation to the link's ``email`` with ``send_email``
    (400 without an email, 409 on a server that sends none: ``mail`` None)."""
    now = unix_now()
    if body.expires_at is not None and body.expires_at <= now:
        raise InvalidInput("expires_at: must be in the future")
    if body.send_email and body.email is None:
        raise InvalidInput("send_email: the link needs an email to send it to")
    if body.send_email and mail is None:
        raise MailNotConfigured
    token, hint = new_link_token()
    async with database.transaction() as tx:
        product = await get_product_row(tx, principal.project_id, product_id)
        if not product.is_claimable:
            raise ProductNotClaimable("product is not claimable: set is_claimable first")
        if product.seat_category is not None:
            raise ProductNotClaimable(
                "a seated product is sold through seat holds (POST /v1/seat-holds), not claimed"
            )
        try:
            link = await repository.add_link(
                tx,
                body.model_dump(exclude={"send_email"})
                | {
                    "project_id": principal.project_id,
                    "product_id": product.id,
                    "token_hash": token_digest(hash_key, token),
                    "token_hint": hint,
                    "claims": 0,
                },
            )
        except IntegrityError as exc:
            raise ReferenceIdTaken("reference_id already used by a claim link") from exc
        url = f"{base_url}/claim/{token}"
        if body.send_email and link.email is not None:
            await outbox.queue_invitation(
                tx,
                principal.project_id,
                link_id=link.id,
                email=link.email,
                product=product.name,
                event_id=product.event_id,
                claim_url=url,
                expires_at=link.expires_at,
            )
        await tx.commit()
    read = ClaimLinkRead.of(link, now)
    return ClaimLinkCreated(**read.model_dump(), token=token, url=url)


async def list_links(
    database: Database, principal: Principal, *, product_id: uuid.UUID, paging: PageParams
) -> ClaimLinkList:
    found = await database.read(repository.read_links, principal.project_id, product_id, paging)
    if found is None:
        raise ProductNotFound
    links, total = found
    now = unix_now()
    return ClaimLinkList(
        claim_links=[ClaimLinkRead.of(link, now) for link in links],
        pagination=Pagination(page=paging.page, limit=paging.limit, total=total),
    )


async def get_link(
    database: Database, principal: Principal, *, product_id: uuid.UUID, link_id: uuid.UUID
) -> ClaimLinkRead:
    link = await database.read(repository.read_link, principal.project_id, product_id, link_id)
    if link is None:
        raise ClaimLinkNotFound
    return ClaimLinkRead.of(link, unix_now())


@rerun_on_conflict
async def revoke_link(
    database: Database, principal: Principal, *, product_id: uuid.UUID, link_id: uuid.UUID
) -> ClaimLinkRead:
    """Revoke a link for good: its token answers 404 from now on. Revoking again changes
    nothing (the first ``revoked_at`` stays)."""
    async with database.transaction() as tx:
        await repository.revoke(tx, link_id, utcnow())
        link = await repository.read_link(tx, principal.project_id, product_id, link_id)
        if link is None:  # the update touched nothing: no such link in this project
            raise ClaimLinkNotFound
        await tx.commit()
    return ClaimLinkRead.of(link, unix_now())


def _open(link: LinkRow | OfferRow) -> None:
    """404 for a revoked link (as for an unknown token), 410 for one expired or used up."""
    status = link_status(link, unix_now())
    if status is LinkStatus.REVOKED:
        raise ClaimLinkNotFound
    if status is LinkStatus.EXPIRED:
        raise ClaimLinkClosed("this claim link has expired")
    if status is LinkStatus.USED_UP:
        raise ClaimLinkClosed("this claim link is used up: every claim it allows was made")


async def key_scope(database: Database, *, token: str, hash_key: bytes) -> KeyScope | None:
    """Whose Idempotency-Keys a claim with ``token`` uses: its link's (None for no link)."""
    link = await database.read(repository.read_link_by_token, token_digest(hash_key, token))
    return None if link is None else KeyScope(link.project_id, str(link.id))


async def view_offer(database: Database, *, token: str, hash_key: bytes) -> ClaimView:
    """What a link offers: the product, its event, the claims left and the expiry."""
    offer = await database.read(repository.read_offer, token_digest(hash_key, token))
    if offer is None:
        raise ClaimLinkNotFound
    _open(offer)
    event = None
    if offer.event_name is not None:
        event = {
            "name": offer.event_name,
            "description": offer.event_description,
            "location": offer.event_location,
            "address": offer.event_address,
            "start_date": offer.event_start_date,
            "end_date": offer.event_end_date,
        }
    return ClaimView.model_validate(
        {
            "product": {
                "name": offer.product_name,
                "description": offer.product_description,
                "type": offer.product_type,
            },
            "event": event,
            "claims_left": offer.max_claims - offer.claims,
            "expires_at": offer.expires_at,
            "quantity": offer.quantity,
        }
    )


@rerun_on_conflict
async def claim(
    database: Database,
    *,
    token: str,
    body: ClaimRequest,
    settings: Settings,
    box: SecretBox,
    mail: TicketMail | None = None,
) -> tuple[uuid.UUID, list[TransferSource], bool]:
    """Claim through a link: (the user's id, the items, whether they are new). A claim issues
    one item, or a waiting list offer's quantity (``ClaimLink.quantity``).

    The link's row is locked first, so the claims of one link are counted one at a time and
    never pass ``max_claims``. The same email claiming again gets the items it claimed (not new),
    even once the link is used up or expired; otherwise the link must be open (404 revoked, 410
    expired or used up) and made for this email if it names one (403). The user is found by
    email in the link's project, or created with a custodial wallet, activated (claiming proves
    the person's intent). The items are issued by the issuing rules (``rules.issue``: active,
    stock, max_per_account, min_rep_balance, the activation rule, the NFT mint); the product
    must still be claimable (409), unless the link is a waiting list's offer, whose stock (or
    seats) kept for it the claim takes (``waiting.rules.offer_of``, then ``claimed``; no lock
    of the product before the issue, which takes it first: docs/design.md). Any refusal changes
    nothing. With ``mail`` (the server sends email), a project that emails tickets emails the
    new items' links to its claimant.
    """
    # The new user's key is made before the write transaction, which it may not need.
    person = UserCreate(email=body.email, first_name=body.first_name, last_name=body.last_name)
    now = utcnow()
    fresh = new_user(person, box=box, ss58_prefix=settings.ss58_prefix, at=now, activated=True)
    async with database.transaction() as tx:
        digest = token_digest(settings.hash_key_bytes, token)
        link = await repository.lock_link_by_token(tx, digest)
        if link is None or link.revoked_at is not None:
            raise ClaimLinkNotFound
        earlier = await repository.claimed_items(tx, link.id, body.email)
        if earlier:
            return earlier[0].row.owner_id, list(earlier), False
        _open(link)
        if link.email is not None and link.email != body.email:
            raise ClaimNotForYou
        user = await find_or_create_user(tx, link.project_id, fresh)
        principal = Principal(
            project_id=link.project_id,
            can_write=True,
            credential=f"claim_link:{link.id}",
            require_activation=await repository.requires_activation(tx, link.project_id),
        )
        offer = await waiting.offer_of(tx, link.id)
        items = await rules.issue(
            tx,
            principal,
            link.product_id,
            [user] * link.quantity,
            hold_id=link.hold_id,
            offered=0 if offer is None or link.hold_id is not None else link.quantity,
        )
        if offer is None and not items[0].product.is_claimable:
            raise ProductNotClaimable
        await repository.count_claim(tx, link.id, now)
        await repository.add_claims(
            tx,
            [
                {"link_id": link.id, "email": body.email, "user_id": user.id, "item_id": i.row.id}
                for i in items
            ],
        )
        shown = [TransferItem.of(item) for item in items]
        claimed = ClaimedEvent(
            claim_link_id=link.id, user_id=user.id, product_item=shown[0], product_items=shown
        )
        await record(tx, link.project_id, EventType.CLAIM_CLAIMED, [claimed])
        if offer is not None:
            await waiting.claimed(tx, offer, link.hold_id is not None, user.id, now)
        if mail is not None and await mails.ticket_emails(tx, link.project_id):
            await outbox.queue_tickets(
                tx,
                link.project_id,
                await tickets_of(tx, mail, link.project_id, items),
                kind=Kind.CLAIMED,
                cause=f"claim:{link.id}",
            )
        await tx.commit()
    return user.id, list(items), True


def claim_answer(
    user_id: uuid.UUID,
    items: list[TransferSource],
    new: bool,
    *,
    hash_key: bytes,
    base_url: str,
) -> ClaimResult:
    """A claim's answer (``claim``'s result). The tickets' pages go to a new claim only: the
    same email again (which anyone with the link can send) gets the items, not their tickets."""
    shown = [TransferItem.of(item) for item in items]
    urls = None
    if new:
        urls = [
            ticket_codes.page_url(base_url, hash_key, item.row.id, item.row.ticket_version)
            for item in items
        ]
    return ClaimResult(
        user_id=user_id,
        product_item=shown[0],
        product_items=shown,
        ticket_url=None if urls is None else urls[0],
        ticket_urls=urls,
    )
