"""The ticket page for its holder: ``GET /tickets/{token}`` (no credential) shows the product,
the event, the holder's name, the item's number, its state and a QR code of the ticket's
secret; ``GET /tickets/{token}/event.ics`` is the event for a calendar. An unknown, malformed
or superseded token is a 404 page. The claim API's answer and the claim page lead to it."""

import base64
import re
import uuid
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
import icalendar
import pytest

from tessera.ticket_keys import codes as codes
from tests.claims.conftest import claimable
from tests.claims.markup import Element, parse
from tests.factories import (
    Tenant,
    create_event,
    create_product,
    create_user,
    issue_items,
    transfer_item,
)
from tests.tickets.qr import decoded, image, modules


def at(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


FESTIVAL = {
    "name": "Harbour Lights Festival",
    "location": "Quay 4",
    "address": "Harbour Road 1, Rotterdam",
    "start_date": at("2031-06-13T18:00"),
    "end_date": at("2031-06-15T23:00"),
}
NOT_VALID = (
    "This ticket is not valid",
    [
        "Check that the address is complete. A ticket that was reissued or passed on to "
        "someone else has a new address: ask the organiser for it."
    ],
)


def checked_headers(response: httpx.Response) -> None:
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "style-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp and "script-src" not in csp
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-content-type-options"] == "nosniff"


def page(response: httpx.Response, status: int) -> Element:
    """The parsed page, once its status and headers are checked: nothing a strict CSP would
    block (no script, no inline style) and nothing from another host."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    checked_headers(response)
    assert "<script" not in response.text and "<style" not in response.text
    assert "style=" not in response.text and "://" not in response.text
    document = parse(response.text)
    assert document.one("html").attrs["lang"] == "en"
    assert document.one("link", rel="stylesheet").attrs["href"] == "/static/tessera.css"
    return document


def refusal(document: Element) -> tuple[str, list[str]]:
    block = document.one(role="alert")
    return block.one("h1").text, [p.text for p in block.all("p")]


def path_of(url: str) -> str:
    return urlsplit(url).path


def shown(when: int) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%d %B %Y, %H:%M UTC")


async def ticket_of(client: httpx.AsyncClient, tenant: Tenant, product_id: str, n: int) -> dict:
    response = await client.get(f"/v1/products/{product_id}/items/{n}/ticket", headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()


async def held(
    client: httpx.AsyncClient, tenant: Tenant, *, event: dict | None = None, **product
) -> tuple[dict, dict, dict, dict]:
    """A product (of ``event``, if given), an item of it for a new user, and its ticket."""
    if event is not None:
        product["event_id"] = (await create_event(client, tenant, **event))["id"]
    created = await create_product(client, tenant, **product)
    user = await create_user(client, tenant, firstName="Ada", lastName="Lovelace")
    [item] = await issue_items(client, tenant, created["id"], user["id"])
    return created, user, item, await ticket_of(client, tenant, created["id"], item["item_id"])


async def check_in(client: httpx.AsyncClient, tenant: Tenant, secret: str) -> dict:
    response = await client.post(
        "/v1/checkins", headers=tenant.w, json={"secret": secret, "nonce": uuid.uuid4().hex}
    )
    assert response.status_code == 200, response.text
    return response.json()


def state(document: Element) -> str:
    return document.one(id="state").text


def qr_code(document: Element) -> Element:
    figure = document.one("figure", class_="qr")
    holder = figure.one(role="img")
    assert holder.attrs["aria-label"] == "QR code of this ticket's secret"
    return holder.one("svg")


class TestTicketPage:
    async def test_a_fresh_ticket(self, client, tenant):
        _, user, item, ticket = await held(
            client, tenant, event=FESTIVAL, name="Weekend <pass>", type="admission"
        )
        assert ticket["url"].startswith("http://tessera.test/tickets/")
        response = await client.get(path_of(ticket["url"]))
        document = page(response, 200)
        assert document.one("title").text == "Ticket: Weekend <pass> · Tessera"
        assert document.one("h1").text == "Weekend <pass>"
        assert "&lt;pass&gt;" in response.text  # escaped, not markup
        assert document.one("p", class_="kicker").text == "Admission ticket"
        assert state(document) == "Valid"
        assert document.one(id="holder").text == "Ada Lovelace"
        assert user["email"] not in response.text  # the name only, never the email
        assert document.one(id="item").text == f"#{item['item_id']}" == "#1"
        event = document.one("section", class_="event")
        assert event.one("h2").text == "Harbour Lights Festival"
        assert "Quay 4, Harbour Road 1, Rotterdam" in event.text
        assert "13 June 2031, 18:00 UTC \N{EN DASH} 15 June 2031, 23:00 UTC" in event.text
        times = [t.attrs["datetime"] for t in event.all("time")]
        assert times == ["2031-06-13T18:00:00+00:00", "2031-06-15T23:00:00+00:00"]
        token = path_of(ticket["url"]).removeprefix("/tickets/")
        assert event.one("a", id="calendar").attrs["href"] == f"{token}/event.ics"
        # The code decodes to the secret, with a quiet zone of four modules all round; the
        # stylesheet sizes it (a viewBox, no width in the markup).
        svg = qr_code(document)
        assert set(svg.attrs) == {"viewbox"}
        markup = response.text[response.text.index("<svg") : response.text.index("</svg>") + 6]
        grid = modules(markup)
        assert not any(grid[r][c] for r in range(len(grid)) for c in (0, 1, 2, 3, -4, -1))
        assert not any(grid[0] + grid[3] + grid[-4] + grid[-1])
        assert decoded(image(grid)) == [ticket["secret"]]
        assert document.one("code", id="secret").text == ticket["secret"]
        assert re.fullmatch(r"[A-Z2-7]{143}", ticket["secret"])
        # The page's token is not the secret: the door needs the secret, not the address.
        assert ticket["secret"] not in ticket["url"]

    async def test_a_holder_without_a_name(self, client, tenant):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant, firstName=None, lastName=None)
        [item] = await issue_items(client, tenant, product["id"], user["id"])
        ticket = await ticket_of(client, tenant, product["id"], item["item_id"])
        document = page(await client.get(path_of(ticket["url"])), 200)
        assert document.one(id="holder").text == "No name given"

    async def test_checked_in_with_uses_left(self, client, tenant):
        _, _, _, ticket = await held(client, tenant, event=FESTIVAL, redemption_quantity=2)
        document = page(await client.get(path_of(ticket["url"])), 200)
        assert state(document) == "Valid (0 of 2 uses redeemed)"
        scanned = await check_in(client, tenant, ticket["secret"])
        document = page(await client.get(path_of(ticket["url"])), 200)
        when = scanned["checked_in_at"]
        assert state(document) == f"Checked in at {shown(when)} (1 of 2 uses redeemed)"
        assert document.one(id="state").attrs["class"] == "state checked-in"
        moment = document.one(id="state").one("time").attrs["datetime"]
        assert datetime.fromisoformat(moment).timestamp() == when

    async def test_fully_redeemed_at_the_door(self, client, tenant):
        _, _, _, ticket = await held(client, tenant, event=FESTIVAL)
        scanned = await check_in(client, tenant, ticket["secret"])
        document = page(await client.get(path_of(ticket["url"])), 200)
        when = shown(scanned["checked_in_at"])
        assert state(document) == f"Fully redeemed, checked in at {when}"
        assert document.one(id="state").attrs["class"] == "state redeemed"
        # Still its page, code and all: the door is what refuses a second use.
        assert document.one("code", id="secret").text == ticket["secret"]

    async def test_fully_redeemed_without_an_event(self, client, tenant):
        product, _, item, ticket = await held(client, tenant)
        redeemed = await client.post(
            f"/v1/products/{product['id']}/items/redeem",
            headers=tenant.w,
            json={"product_item_id": item["id"]},
        )
        assert redeemed.status_code == 200, redeemed.text
        document = page(await client.get(path_of(ticket["url"])), 200)
        assert state(document) == "Fully redeemed"

    async def test_a_reissued_token_is_a_404_page_and_the_new_one_works(self, client, tenant):
        product, _, item, ticket = await held(client, tenant, event=FESTIVAL)
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/{item['item_id']}/ticket/reissue",
            headers=tenant.w,
        )
        assert reissued.status_code == 200, reissued.text
        new = reissued.json()
        assert new["url"] != ticket["url"]
        for old in (path_of(ticket["url"]), path_of(ticket["url"]) + "/event.ics"):
            document = page(await client.get(old), 404)
            assert refusal(document) == NOT_VALID
            assert document.one("title").text == "This ticket is not valid · Tessera"
            assert document.all("svg") == []
        document = page(await client.get(path_of(new["url"])), 200)
        assert document.one("code", id="secret").text == new["secret"] != ticket["secret"]
        assert (await client.get(path_of(new["url"]) + "/event.ics")).status_code == 200

    async def test_a_transferred_ticket_is_its_new_holders(self, client, tenant):
        product, sender, item, ticket = await held(client, tenant, is_transferable=True)
        recipient = await create_user(client, tenant, firstName="Grace", lastName="Hopper")
        moved = await transfer_item(client, tenant, product["id"], item["id"], sender, recipient)
        assert moved.status_code == 200, moved.text
        # The old page says what any unknown address says: nothing of the new holder.
        document = page(await client.get(path_of(ticket["url"])), 404)
        assert refusal(document) == NOT_VALID
        now = await ticket_of(client, tenant, product["id"], item["item_id"])
        document = page(await client.get(path_of(now["url"])), 200)
        assert document.one(id="holder").text == "Grace Hopper"

    @pytest.mark.parametrize(
        "token",
        [
            "x",
            "x" * 43,
            "A" * 300,
            "not%20a%20token",
            "%C3%A9" * 43,
            base64.urlsafe_b64encode(bytes(32)).decode().rstrip("="),
        ],
    )
    async def test_unknown_or_malformed_tokens_are_a_404_page(self, client, tenant, token):
        await held(client, tenant)
        for path in (f"/tickets/{token}", f"/tickets/{token}/event.ics"):
            document = page(await client.get(path), 404)
            assert refusal(document) == NOT_VALID

    async def test_a_nul_is_refused_as_everywhere(self, client, tenant):
        for path in ("/tickets/" + "%00" * 43, "/tickets/%00/event.ics"):
            response = await client.get(path)
            assert response.status_code == 400
            assert response.json() == {
                "errors": ["path: must not contain the NUL character (\\u0000)"]
            }

    async def test_codes_that_are_not_the_pages(self, client, tenant, app):
        """The item's id with a MAC that is not its current page's: the secret's use, the
        next version's, another key's, or a flipped bit, each a 404 like any stranger's."""
        _, _, item, ticket = await held(client, tenant)
        item_id = uuid.UUID(item["id"])
        key = app.state.settings.hash_key_bytes
        token = path_of(ticket["url"]).removeprefix("/tickets/")
        assert token == codes.page_token(key, item_id, 1)
        raw = bytearray(base64.urlsafe_b64decode(token + "="))
        raw[-1] ^= 1
        for wrong in (
            codes.page_token(key, item_id, 2),
            codes.page_token(b"another key" * 3, item_id, 1),
            base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("="),
            ticket["secret"],
        ):
            document = page(await client.get(f"/tickets/{wrong}"), 404)
            assert refusal(document) == NOT_VALID
        assert (await client.get(f"/tickets/{token}")).status_code == 200

    async def test_each_projects_token_opens_its_own_ticket_only(self, client, tenant, other):
        _, _, _, ours = await held(client, tenant, name="Our pass")
        _, _, _, theirs = await held(client, other, name="Their pass")
        # No credential is involved: another project's key changes nothing either way.
        for headers in ({}, tenant.w, other.w):
            document = page(await client.get(path_of(ours["url"]), headers=headers), 200)
            assert document.one("h1").text == "Our pass"
            assert document.one("code", id="secret").text == ours["secret"]
            document = page(await client.get(path_of(theirs["url"]), headers=headers), 200)
            assert document.one("h1").text == "Their pass"
            assert document.one("code", id="secret").text == theirs["secret"]
        # A project's API does not know the other's ticket.
        scanned = await client.post(
            "/v1/checkins", headers=tenant.w, json={"secret": theirs["secret"], "nonce": "n-1"}
        )
        assert scanned.status_code == 404


class TestCalendar:
    async def test_the_event_as_icalendar(self, client, tenant):
        product, _, item, ticket = await held(client, tenant, event=FESTIVAL, name="Weekend pass")
        response = await client.get(path_of(ticket["url"]) + "/event.ics")
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/calendar; charset=utf-8"
        assert response.headers["content-disposition"] == 'attachment; filename="event.ics"'
        checked_headers(response)
        calendar = icalendar.Calendar.from_ical(response.content)
        assert str(calendar["version"]) == "2.0"
        [event] = calendar.walk("VEVENT")
        assert str(event["uid"]) == f"{item['id']}@tessera"
        assert event.decoded("dtstart") == datetime(2031, 6, 13, 18, 0, tzinfo=UTC)
        assert event.decoded("dtend") == datetime(2031, 6, 15, 23, 0, tzinfo=UTC)
        assert b"DTSTART:20310613T180000Z" in response.content
        assert str(event["summary"]) == "Harbour Lights Festival"
        assert str(event["location"]) == "Quay 4, Harbour Road 1, Rotterdam"
        assert str(event["description"]) == "Weekend pass, item #1"
        assert event.decoded("dtstamp").tzinfo is not None
        # Neither the secret nor the page's address goes into a calendar.
        assert ticket["secret"].encode() not in response.content
        assert b"tickets/" not in response.content
        # The UID is the item's: the new ticket after a reissue updates the same entry.
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/1/ticket/reissue", headers=tenant.w
        )
        again = await client.get(path_of(reissued.json()["url"]) + "/event.ics")
        [event] = icalendar.Calendar.from_ical(again.content).walk("VEVENT")
        assert str(event["uid"]) == f"{item['id']}@tessera"

    async def test_no_calendar_for_a_product_without_event(self, client, tenant):
        _, _, _, ticket = await held(client, tenant)
        document = page(await client.get(path_of(ticket["url"])), 200)
        assert document.all("section") == []
        assert [a.attrs["id"] for a in document.all("a")] == ["pdf"]  # the PDF, no calendar
        assert document.all("time") == []
        document = page(await client.get(path_of(ticket["url"]) + "/event.ics"), 404)
        assert refusal(document) == (
            "This ticket has no event",
            ["There is nothing to put in a calendar."],
        )


class TestClaimLeadsToTheTicket:
    async def test_the_claim_answer_has_the_ticket_url(self, client, tenant, limiter):
        _, link = await claimable(client, tenant, name="Gold badge", link={"max_claims": 2})
        claimed = await client.post(
            f"/v1/claims/{link['token']}",
            json={"email": "ada@example.com", "firstName": "Ada", "lastName": "Lovelace"},
        )
        assert claimed.status_code == 201, claimed.text
        body = claimed.json()
        assert set(body) == {
            "user_id",
            "product_item",
            "product_items",
            "ticket_url",
            "ticket_urls",
        }
        assert body["ticket_url"].startswith("http://tessera.test/tickets/")
        document = page(await client.get(path_of(body["ticket_url"])), 200)
        assert document.one("h1").text == "Gold badge"
        assert document.one(id="holder").text == "Ada Lovelace"
        assert document.one(id="item").text == f"#{body['product_item']['item_id']}"
        # The same email again gets the item, not its ticket: anyone with the link can send
        # that email.
        again = await client.post(f"/v1/claims/{link['token']}", json={"email": "ada@example.com"})
        assert again.status_code == 200
        assert again.json() == body | {"ticket_url": None, "ticket_urls": None}

    async def test_the_claim_page_links_to_the_ticket(self, client, tenant, limiter):
        _, link = await claimable(client, tenant, name="Gold badge")
        response = await client.post(
            f"/claim/{link['token']}", data={"email": "grace@example.com", "first_name": "Grace"}
        )
        assert response.status_code == 201
        document = parse(response.text)
        target = document.one("a").attrs["href"]
        assert target.startswith("http://tessera.test/tickets/")
        assert document.one("a").text == "Open your ticket"
        ticket = page(await client.get(path_of(target)), 200)
        assert ticket.one(id="holder").text == "Grace"
        # The same email again: the item, no ticket link.
        again = await client.post(f"/claim/{link['token']}", data={"email": "grace@example.com"})
        assert again.status_code == 200
        assert parse(again.text).all("a") == []

    async def test_the_public_base_url_is_used(self, client, tenant, limiter, app):
        settings = app.state.settings
        app.state.settings = settings.model_copy(update={"public_url": "https://tickets.example"})
        try:
            _, link = await claimable(client, tenant)
            claimed = await client.post(f"/v1/claims/{link['token']}", json={"email": "b@x.org"})
        finally:
            app.state.settings = settings
        assert claimed.json()["ticket_url"].startswith("https://tickets.example/tickets/")
        assert (await client.get(path_of(claimed.json()["ticket_url"]))).status_code == 200
