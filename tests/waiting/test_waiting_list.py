"""A product's waiting list through the API on the test database (SQLite or PostgreSQL), with
its offers emailed to a real SMTP server: what docs/api.md ("Waiting list") promises, each
refusal with what it leaves unchanged, and the walk of issue 45 (a sold-out product, stock
raised, an offer kept from strangers, one that lapses to the next in line, one claimed)."""

import asyncio
import re
import time
import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from tessera.db import database_of
from tessera.models import ClaimLink, WaitingEntry
from tessera.waiting.tasks import offers_chore
from tests import orm
from tests.changes.feed import of_type
from tests.factories import (
    Tenant,
    create_event,
    create_order,
    create_product,
    create_user,
    make_tenant,
    row_counts,
)
from tests.mail.conftest import mails, send_until

CLAIM_URL = re.compile(r"http://tessera\.test/claim/(tcl_[A-Za-z0-9_-]+)")


def url(product: dict[str, Any]) -> str:
    return f"/v1/products/{product['id']}/waiting-list"


async def join(
    client: httpx.AsyncClient, tenant: Tenant, product: dict[str, Any], email: str, **body: Any
) -> httpx.Response:
    return await client.post(url(product), headers=tenant.w, json={"email": email} | body)


async def joined(
    client: httpx.AsyncClient, tenant: Tenant, product: dict[str, Any], email: str, **body: Any
) -> dict[str, Any]:
    response = await join(client, tenant, product, email, **body)
    assert response.status_code == 201, response.text
    entry: dict[str, Any] = response.json()
    return entry


async def line(
    client: httpx.AsyncClient, tenant: Tenant, product: dict[str, Any], **query: Any
) -> list[tuple[str, str, int | None]]:
    """The list as (email, status, position), in its order."""
    response = await client.get(url(product), headers=tenant.r, params=query)
    assert response.status_code == 200, response.text
    return [(e["email"], e["status"], e["position"]) for e in response.json()["entries"]]


async def sold_out(client: httpx.AsyncClient, tenant: Tenant, stock: int = 2) -> dict[str, Any]:
    """A product of ``stock`` tickets, all sold."""
    product = await create_product(client, tenant, stock=stock)
    buyer = await create_user(client, tenant)
    sold = await create_order(client, tenant, buyer["id"], (product["id"], stock))
    assert sold.status_code == 201, sold.text
    return product


async def offers(app: FastAPI) -> dict[str, str]:
    """Each offer emailed so far: recipient -> the token of its claim link."""
    found = {}
    for mail in await mails(database_of(app)):
        if mail.cause.startswith("waiting-offer:"):
            match = CLAIM_URL.search(mail.text_body)
            assert match is not None, mail.text_body
            found[mail.recipient] = match.group(1)
    return found


async def lapse(app: FastAPI, email: str) -> None:
    """``email``'s offer ends now, as if its time had passed."""
    past = int(time.time()) - 1
    async with orm.session(database_of(app)) as session:
        entry = await session.scalar(
            update(WaitingEntry)
            .where(WaitingEntry.email == email, WaitingEntry.status == "offered")
            .values(offer_expires_at=past)
            .returning(WaitingEntry.link_id)
        )
        await session.execute(
            update(ClaimLink).where(ClaimLink.id == entry).values(expires_at=past)
        )
        await session.commit()


async def run_chore(app: FastAPI, settings: Any) -> int:
    _, move_lines = offers_chore(settings.hash_key_bytes)
    moved: int = await move_lines(database_of(app))
    return moved


class TestTheList:
    async def test_an_entry_joins_at_the_end_of_the_line(self, client, tenant):
        product = await sold_out(client, tenant)
        first = await joined(client, tenant, product, "Ada@Example.com", first_name="Ada")
        assert first["position"] == 1 and first["status"] == "waiting"
        assert first["email"] == "ada@example.com"  # as kept: lower case
        assert first["quantity"] == 1 and first["offer_expires_at"] is None
        uuid.UUID(first["id"])
        second = await joined(client, tenant, product, "bob@example.com", quantity=3)
        assert (second["position"], second["quantity"]) == (2, 3)
        assert await line(client, tenant, product) == [
            ("ada@example.com", "waiting", 1),
            ("bob@example.com", "waiting", 2),
        ]

    async def test_one_live_entry_per_email_and_product(self, client, tenant, database):
        product = await sold_out(client, tenant)
        await joined(client, tenant, product, "ada@example.com")
        counts = await row_counts(database)
        again = await join(client, tenant, product, "ADA@example.com", quantity=2)
        assert again.status_code == 409
        assert again.json() == {
            "message": "ada@example.com is already on this product's waiting list"
        }
        assert await row_counts(database) == counts
        other = await sold_out(client, tenant)
        assert (await join(client, tenant, other, "ada@example.com")).status_code == 201

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"email": "not an email"}, "email"),
            ({"email": "a@example.com", "quantity": 0}, "quantity"),
            ({"email": "a@example.com", "quantity": 11}, "quantity"),
            ({"email": "a@example.com", "quantity": "2"}, "quantity"),
            ({"email": "a@example.com", "position": 1}, "position"),
            ({}, "email"),
        ],
    )
    async def test_bad_input_is_refused_and_changes_nothing(
        self, client, tenant, database, body, field
    ):
        product = await sold_out(client, tenant)
        counts = await row_counts(database)
        response = await client.post(url(product), headers=tenant.w, json=body)
        assert response.status_code == 400, response.text
        assert field in response.text
        assert await row_counts(database) == counts

    async def test_a_product_with_stock_free_is_not_sold_out(self, client, tenant, database):
        product = await create_product(client, tenant, stock=5)
        unlimited = await create_product(client, tenant)
        counts = await row_counts(database)
        response = await join(client, tenant, product, "ada@example.com", quantity=5)
        assert response.status_code == 409
        assert response.json() == {
            "message": "the product is not sold out (5 left): buy it instead"
        }
        response = await join(client, tenant, unlimited, "ada@example.com")
        assert response.json() == {
            "message": "the product is not sold out (unlimited): buy it instead"
        }
        assert await row_counts(database) == counts
        # More than is left: the person waits for the rest to come back.
        assert (
            await join(client, tenant, product, "ada@example.com", quantity=6)
        ).status_code == 201

    async def test_a_server_that_sends_no_email_keeps_no_waiting_list(self, plain, tenant):
        product = await sold_out(plain, tenant)
        response = await join(plain, tenant, product, "ada@example.com")
        assert response.status_code == 409
        assert response.json() == {
            "message": "a waiting list's offers are emailed: this server sends none"
        }

    async def test_another_project_s_product_and_entries_are_not_found(
        self, client, tenant, mail_app
    ):
        product = await sold_out(client, tenant)
        entry = await joined(client, tenant, product, "ada@example.com")
        other = await make_tenant(mail_app, name="Other")
        assert (await join(client, other, product, "eve@example.com")).status_code == 404
        listed = await client.get(url(product), headers=other.r)
        assert listed.status_code == 404
        removed = await client.delete(f"{url(product)}/{entry['id']}", headers=other.w)
        assert removed.status_code == 404
        assert await line(client, tenant, product) == [("ada@example.com", "waiting", 1)]

    async def test_a_read_key_cannot_join_or_remove(self, client, tenant):
        product = await sold_out(client, tenant)
        entry = await joined(client, tenant, product, "ada@example.com")
        refused = await client.post(url(product), headers=tenant.r, json={"email": "b@e.com"})
        assert refused.status_code == 403
        removal = await client.delete(f"{url(product)}/{entry['id']}", headers=tenant.r)
        assert removal.status_code == 403

    async def test_removing_an_entry_moves_the_line_up(self, client, tenant):
        product = await sold_out(client, tenant)
        ada = await joined(client, tenant, product, "ada@example.com")
        await joined(client, tenant, product, "bob@example.com")
        removed = await client.delete(f"{url(product)}/{ada['id']}", headers=tenant.w)
        assert removed.status_code == 200, removed.text
        assert (removed.json()["status"], removed.json()["position"]) == ("removed", None)
        again = await client.delete(f"{url(product)}/{ada['id']}", headers=tenant.w)
        assert again.json() == removed.json()  # removing again changes nothing
        assert await line(client, tenant, product) == [
            ("ada@example.com", "removed", None),
            ("bob@example.com", "waiting", 1),
        ]
        assert await line(client, tenant, product, status="waiting") == [
            ("bob@example.com", "waiting", 1)
        ]
        # Out of line, the email may join again: at the end.
        back = await joined(client, tenant, product, "ada@example.com")
        assert back["position"] == 2
        unknown = await client.delete(f"{url(product)}/{uuid.uuid4()}", headers=tenant.w)
        assert unknown.status_code == 404
        assert unknown.json() == {"message": "waiting list entry not found"}

    async def test_the_list_pages(self, client, tenant):
        product = await sold_out(client, tenant)
        for n in range(5):
            await joined(client, tenant, product, f"p{n}@example.com")
        response = await client.get(url(product), headers=tenant.r, params={"page": 2, "limit": 2})
        body = response.json()
        assert [e["position"] for e in body["entries"]] == [3, 4]
        assert body["pagination"] == {"page": 2, "limit": 2, "total": 5}


class TestOffers:
    async def test_the_walk_stock_raised_offers_kept_lapsed_and_claimed(
        self, client, tenant, mail_app, mail_settings
    ):
        """Issue 45's walk: a sold-out product, three in line; its stock raised by 2."""
        product = await sold_out(client, tenant, stock=2)
        for email in ("ada@example.com", "bob@example.com", "cy@example.com"):
            await joined(client, tenant, product, email)
        raised = await client.patch(
            f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 4}
        )
        assert raised.status_code == 200, raised.text
        assert await line(client, tenant, product) == [
            ("ada@example.com", "offered", 1),
            ("bob@example.com", "offered", 2),
            ("cy@example.com", "waiting", 3),
        ]
        sent = await offers(mail_app)
        assert set(sent) == {"ada@example.com", "bob@example.com"}

        # The stock kept for the offers is nobody else's.
        stranger = await create_user(client, tenant)
        refused = await create_order(client, tenant, stranger["id"], (product["id"], 1))
        assert refused.status_code == 409
        assert refused.json() == {
            "message": "product is out of stock: 0 left (2 kept for waiting list offers), "
            "1 requested"
        }
        # ... nor can the stock go below it.
        lowered = await client.patch(
            f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 3}
        )
        assert lowered.status_code == 409

        # The link is bound to its person.
        view = await client.get(f"/v1/claims/{sent['bob@example.com']}")
        assert view.status_code == 200 and view.json()["quantity"] == 1
        wrong = await client.post(
            f"/v1/claims/{sent['bob@example.com']}", json={"email": "eve@example.com"}
        )
        assert wrong.status_code == 403

        # Ada's offer lapses: Cy is next.
        await lapse(mail_app, "ada@example.com")
        assert await run_chore(mail_app, mail_settings) == 1
        assert await line(client, tenant, product) == [
            ("ada@example.com", "expired", None),
            ("bob@example.com", "offered", 1),
            ("cy@example.com", "offered", 2),
        ]
        late = await client.post(
            f"/v1/claims/{sent['ada@example.com']}", json={"email": "ada@example.com"}
        )
        assert late.status_code == 410

        # Bob claims: his ticket is issued, to him.
        claimed = await client.post(
            f"/v1/claims/{sent['bob@example.com']}", json={"email": "bob@example.com"}
        )
        assert claimed.status_code == 201, claimed.text
        items = claimed.json()["product_items"]
        assert [item["item_id"] for item in items] == [3]
        assert await line(client, tenant, product) == [
            ("ada@example.com", "expired", None),
            ("bob@example.com", "claimed", None),
            ("cy@example.com", "offered", 1),
        ]
        entries = {
            e["email"]: e
            for e in (await client.get(url(product), headers=tenant.r)).json()["entries"]
        }

        changes = {
            kind: [
                (c["data"]["email"], c["data"]["status"])
                for c in await of_type(client, tenant, kind)
            ]
            for kind in ("waiting_list.offered", "waiting_list.expired", "waiting_list.claimed")
        }
        assert changes == {
            "waiting_list.offered": [
                ("ada@example.com", "offered"),
                ("bob@example.com", "offered"),
                ("cy@example.com", "offered"),
            ],
            "waiting_list.expired": [("ada@example.com", "expired")],
            "waiting_list.claimed": [("bob@example.com", "claimed")],
        }
        [claim_change] = await of_type(client, tenant, "waiting_list.claimed")
        assert claim_change["data"]["user_id"] == claimed.json()["user_id"]
        assert claim_change["data"]["id"] == entries["bob@example.com"]["id"]
        assert "tcl_" not in str(changes) and "tcl_" not in str(claim_change)

    async def test_an_offer_is_for_the_entry_s_quantity_and_a_larger_one_waits(
        self, client, tenant, mail_app
    ):
        product = await sold_out(client, tenant, stock=1)
        await joined(client, tenant, product, "big@example.com", quantity=3)
        await joined(client, tenant, product, "pair@example.com", quantity=2)
        raised = await client.patch(
            f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 3}
        )
        assert raised.status_code == 200
        # 2 came back: not enough for the first entry, enough for the second.
        assert await line(client, tenant, product) == [
            ("big@example.com", "waiting", 1),
            ("pair@example.com", "offered", 2),
        ]
        token = (await offers(mail_app))["pair@example.com"]
        claimed = await client.post(f"/v1/claims/{token}", json={"email": "pair@example.com"})
        assert claimed.status_code == 201, claimed.text
        body = claimed.json()
        assert [item["item_id"] for item in body["product_items"]] == [2, 3]
        assert body["product_item"] == body["product_items"][0]
        assert len(body["ticket_urls"]) == 2 and body["ticket_url"] == body["ticket_urls"][0]
        again = await client.post(f"/v1/claims/{token}", json={"email": "pair@example.com"})
        assert again.status_code == 200
        assert again.json()["product_items"] == body["product_items"]
        # Then 3 more: the first entry's turn.
        await client.patch(f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 6})
        assert (await line(client, tenant, product))[0] == ("big@example.com", "offered", 1)

    async def test_an_offer_on_a_product_that_is_not_claimable(self, client, tenant, mail_app):
        """Offers work whatever ``is_claimable`` says: the link is the waiting list's."""
        product = await sold_out(client, tenant, stock=1)
        assert product["is_claimable"] is False
        await joined(client, tenant, product, "ada@example.com")
        await client.patch(f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 2})
        token = (await offers(mail_app))["ada@example.com"]
        claimed = await client.post(f"/v1/claims/{token}", json={"email": "ada@example.com"})
        assert claimed.status_code == 201, claimed.text

    async def test_removing_an_offered_entry_withdraws_its_offer_for_the_next(
        self, client, tenant, mail_app
    ):
        product = await sold_out(client, tenant, stock=1)
        ada = await joined(client, tenant, product, "ada@example.com")
        await joined(client, tenant, product, "bob@example.com")
        await client.patch(f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 2})
        token = (await offers(mail_app))["ada@example.com"]
        removed = await client.delete(f"{url(product)}/{ada['id']}", headers=tenant.w)
        assert removed.json()["status"] == "removed"
        assert (await client.get(f"/v1/claims/{token}")).status_code == 404
        assert await line(client, tenant, product) == [
            ("ada@example.com", "removed", None),
            ("bob@example.com", "offered", 1),
        ]
        bob = (await client.get(url(product), headers=tenant.r)).json()["entries"][1]
        token = (await offers(mail_app))["bob@example.com"]
        assert (
            await client.post(f"/v1/claims/{token}", json={"email": "bob@example.com"})
        ).status_code == 201
        refused = await client.delete(f"{url(product)}/{bob['id']}", headers=tenant.w)
        assert refused.status_code == 409
        assert refused.json() == {
            "message": "the waiting list entry is claimed: it is out of line already"
        }

    async def test_the_offer_email_names_the_product_the_quantity_and_the_deadline(
        self, client, tenant, mail_app, smtp, postman
    ):
        event = await create_event(client, tenant, name="Spring Gala")
        product = await create_product(client, tenant, stock=1, event_id=event["id"])
        buyer = await create_user(client, tenant)
        assert (
            await create_order(client, tenant, buyer["id"], (product["id"], 1))
        ).status_code == 201
        await send_until(postman, lambda: len(smtp.received) >= 1)  # the buyer's tickets
        smtp.reset()
        await joined(client, tenant, product, "ada@example.com", first_name="Ada", quantity=2)
        await client.patch(
            f"/v1/products/{product['id']}",
            headers=tenant.w,
            json={"stock": 3, "waiting_list_offer_seconds": 3600},
        )
        [entry] = (await client.get(url(product), headers=tenant.r)).json()["entries"]
        assert entry["offer_expires_at"] - entry["offered_at"] == 3600
        await send_until(postman, lambda: len(smtp.received) >= 1)
        [offer] = smtp.received
        assert offer.to == "ada@example.com"
        assert offer.subject == "Your turn: tickets for Spring Gala"
        assert "Hello Ada," in offer.text
        assert "2 tickets for Spring Gala came free" in offer.text
        assert CLAIM_URL.search(offer.text) is not None
        assert CLAIM_URL.search(offer.html) is not None


class TestSeatedOffers:
    """A seated product's offer keeps the best seats side by side for the entry, and its
    claim's items get them."""

    async def seated_sold_out(self, client: httpx.AsyncClient, tenant: Tenant) -> dict[str, Any]:
        """Row A of 4 front seats: A3-A4 sold, A1-A2 kept for a pending order."""
        from tests.seats.test_seats import plan_of, put_plan, seat_ids

        event = await create_event(client, tenant)
        plan = await put_plan(client, tenant, event["id"], plan_of(("Stalls", [("A", 4, "front")])))
        product = await create_product(client, tenant, event_id=event["id"], seat_category="front")
        buyer = await create_user(client, tenant)
        ids = seat_ids(plan)
        orders = {}
        for status, seats in (("completed", ("3", "4")), ("pending", ("1", "2"))):
            held = await client.post(
                "/v1/seat-holds",
                headers=tenant.w,
                json={"product_id": product["id"], "seats": [ids["Stalls", "A", n] for n in seats]},
            )
            assert held.status_code == 201, held.text
            body = {
                "user": {"id": buyer["id"]},
                "status": status,
                "items": [
                    {"product_id": product["id"], "quantity": 2, "hold_id": held.json()["id"]}
                ],
            }
            order = await client.post("/v1/orders", headers=tenant.w, json=body)
            assert order.status_code == 201, order.text
            orders[status] = order.json()
        return {"event": event, "product": product, "pending": orders["pending"], "ids": ids}

    async def test_seats_freed_go_to_the_line_held_together_and_are_the_claim_s(
        self, client, tenant, mail_app, mail_settings
    ):
        from tests.seats.test_seats import statuses

        theatre = await self.seated_sold_out(client, tenant)
        product, event_id = theatre["product"], theatre["event"]["id"]
        ada = await joined(client, tenant, product, "ada@example.com", quantity=2)
        assert ada["status"] == "waiting"
        cancelled = await client.post(
            f"/v1/orders/{theatre['pending']['id']}/cancel", headers=tenant.w
        )
        assert cancelled.status_code == 200
        # Freed while someone waits: a stranger's hold cannot take them ...
        stranger = await client.post(
            "/v1/seat-holds", headers=tenant.w, json={"product_id": product["id"], "count": 1}
        )
        assert stranger.status_code == 409
        assert stranger.json() == {
            "message": "the seats available (2) are kept for the product's waiting list, "
            "which waits for 2"
        }
        # ... and the worker offers them within its round.
        assert await run_chore(mail_app, mail_settings) == 1
        assert await line(client, tenant, product) == [("ada@example.com", "offered", 1)]
        seats = await statuses(client, tenant, event_id)
        assert seats == {
            ("Stalls", "A", "1"): "held",
            ("Stalls", "A", "2"): "held",
            ("Stalls", "A", "3"): "sold",
            ("Stalls", "A", "4"): "sold",
        }
        token = (await offers(mail_app))["ada@example.com"]
        claimed = await client.post(f"/v1/claims/{token}", json={"email": "ada@example.com"})
        assert claimed.status_code == 201, claimed.text
        got = [
            (i["item_id"], i["seat"]["row"], i["seat"]["number"])
            for i in claimed.json()["product_items"]
        ]
        assert got == [(3, "A", "1"), (4, "A", "2")]
        assert set((await statuses(client, tenant, event_id)).values()) == {"sold"}
        assert await line(client, tenant, product) == [("ada@example.com", "claimed", None)]

    async def test_a_lapsed_seated_offer_frees_its_seats_for_the_next(
        self, client, tenant, mail_app, mail_settings
    ):
        theatre = await self.seated_sold_out(client, tenant)
        product = theatre["product"]
        await joined(client, tenant, product, "ada@example.com", quantity=2)
        await joined(client, tenant, product, "bob@example.com", quantity=2)
        await client.post(f"/v1/orders/{theatre['pending']['id']}/cancel", headers=tenant.w)
        await run_chore(mail_app, mail_settings)
        token = (await offers(mail_app))["ada@example.com"]
        await lapse(mail_app, "ada@example.com")
        async with orm.session(database_of(mail_app)) as session:  # the hold lapses with it
            from tessera.models import Seat, SeatHold

            link = await session.scalar(
                update(ClaimLink)
                .where(ClaimLink.email == "ada@example.com")
                .values(updated_at=ClaimLink.updated_at)
                .returning(ClaimLink.hold_id)
            )
            await session.execute(
                update(SeatHold).where(SeatHold.id == link).values(expires_at=int(time.time()) - 1)
            )
            await session.execute(
                update(Seat).where(Seat.hold_id == link).values(held_until=int(time.time()) - 1)
            )
            await session.commit()
        await run_chore(mail_app, mail_settings)
        assert await line(client, tenant, product) == [
            ("ada@example.com", "expired", None),
            ("bob@example.com", "offered", 1),
        ]
        late = await client.post(f"/v1/claims/{token}", json={"email": "ada@example.com"})
        assert late.status_code == 410
        token = (await offers(mail_app))["bob@example.com"]
        claimed = await client.post(f"/v1/claims/{token}", json={"email": "bob@example.com"})
        assert claimed.status_code == 201, claimed.text
        assert [i["seat"]["number"] for i in claimed.json()["product_items"]] == ["1", "2"]


async def test_the_claim_page_of_an_offer_claims_all_its_tickets(client, tenant, mail_app):
    """The person follows the emailed link: the page says how many tickets, and its form
    claims them all, with a link to each ticket."""
    product = await sold_out(client, tenant, stock=1)
    await joined(client, tenant, product, "ada@example.com", quantity=2)
    await client.patch(f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 3})
    token = (await offers(mail_app))["ada@example.com"]
    shown = await client.get(f"/claim/{token}")
    assert shown.status_code == 200
    assert "2 tickets for one claim" in shown.text and "Claim 2 tickets" in shown.text
    claimed = await client.post(f"/claim/{token}", data={"email": "ada@example.com"})
    assert claimed.status_code == 201, claimed.text
    assert "Items #2, #3 are held for ada@example.com." in claimed.text
    tickets = re.findall(r'href="(http://tessera\.test/tickets/[^"]+)"', claimed.text)
    assert len(tickets) == 2
    for ticket in tickets:
        assert (await client.get(ticket)).status_code == 200


async def test_an_inactive_product_s_line_is_offered_first_when_it_is_switched_on(
    client, tenant, mail_app
):
    """People may queue before the sale: switched on, the product offers them its stock
    first, in line."""
    product = await create_product(client, tenant, stock=3, active=False)
    await joined(client, tenant, product, "ada@example.com", quantity=2)
    await joined(client, tenant, product, "bob@example.com", quantity=2)
    on = await client.patch(
        f"/v1/products/{product['id']}", headers=tenant.w, json={"active": True}
    )
    assert on.status_code == 200
    assert await line(client, tenant, product) == [
        ("ada@example.com", "offered", 1),
        ("bob@example.com", "waiting", 2),
    ]
    buyer = await create_user(client, tenant)
    assert (await create_order(client, tenant, buyer["id"], (product["id"], 1))).status_code == 201
    assert (await create_order(client, tenant, buyer["id"], (product["id"], 1))).status_code == 409


async def test_offers_claimed_while_strangers_buy_never_sell_past_the_stock(
    client, tenant, mail_app
):
    """Claims of offers and strangers' orders at once: the offers' stock is the claimants',
    every stranger is refused with 409, and no more is issued than the stock."""
    product = await sold_out(client, tenant, stock=1)
    emails = [f"p{n}@example.com" for n in range(5)]
    for email in emails:
        await joined(client, tenant, product, email)
    await client.patch(f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 4})
    sent = await offers(mail_app)
    assert set(sent) == set(emails[:3])
    strangers = [await create_user(client, tenant) for _ in range(8)]

    async def claim(email: str) -> httpx.Response:
        return await client.post(f"/v1/claims/{sent[email]}", json={"email": email})

    async def buy(user: dict[str, Any]) -> httpx.Response:
        return await create_order(client, tenant, user["id"], (product["id"], 1))

    answers = await asyncio.gather(
        *(claim(email) for email in emails[:3]), *(buy(user) for user in strangers)
    )
    assert [a.status_code for a in answers] == [201] * 3 + [409] * 8
    read = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
    assert read.json()["pagination"]["total"] == 4


async def test_an_offer_lapses_in_its_own_time_and_the_worker_passes_it_on(
    client, tenant, mail_app, mail_settings
):
    """No clock set by hand: an offer of one second, the worker's round after it."""
    product = await sold_out(client, tenant, stock=1)
    await client.patch(
        f"/v1/products/{product['id']}", headers=tenant.w, json={"waiting_list_offer_seconds": 1}
    )
    await joined(client, tenant, product, "ada@example.com")
    await joined(client, tenant, product, "bob@example.com")
    await client.patch(f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 2})
    assert [status for _, status, _ in await line(client, tenant, product)] == [
        "offered",
        "waiting",
    ]
    await asyncio.sleep(2.1)  # past the offer's second, whole seconds apart
    assert await run_chore(mail_app, mail_settings) == 1
    assert await line(client, tenant, product) == [
        ("ada@example.com", "expired", None),
        ("bob@example.com", "offered", 1),
    ]
    assert await run_chore(mail_app, mail_settings) == 0  # nothing more to move


async def test_returned_stock_reaches_a_small_entry_behind_larger_ones(client, tenant):
    """3 come back; the line wants 2, 2, 2, 1: the first 2 and the 1 are served, whatever
    how many entries were read at first."""
    product = await sold_out(client, tenant, stock=1)
    for n, quantity in enumerate((2, 2, 2, 1)):
        await joined(client, tenant, product, f"p{n}@example.com", quantity=quantity)
    await client.patch(f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 4})
    assert [status for _, status, _ in await line(client, tenant, product)] == [
        "offered",
        "waiting",
        "waiting",
        "offered",
    ]
