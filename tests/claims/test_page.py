"""The claim page for people: ``GET /claim/{token}`` shows the offer and a form, posting the form
claims; every refusal of the claim API has its page, with the API's status code."""

import time
from datetime import UTC, datetime

import httpx
import pytest

from tessera.claims.limiter import ClaimLimiter
from tests.claims.conftest import claimable, from_address
from tests.claims.markup import Element, parse
from tests.claims.test_claims import expire
from tests.factories import create_event, row_counts


def page(response: httpx.Response, status: int) -> Element:
    """The parsed page, once its status and the headers every claim page carries are checked."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "form-action 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-content-type-options"] == "nosniff"
    document = parse(response.text)
    assert document.one("html").attrs["lang"] == "en"
    assert document.one("link", rel="stylesheet").attrs["href"] == "/static/tessera.css"
    return document


def shown(when: int) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%d %B %Y, %H:%M UTC")


def refusal(document: Element) -> tuple[str, list[str]]:
    """The heading and the lines of a refusal page (one role=alert block)."""
    block = document.one(role="alert")
    return block.one("h1").text, [p.text for p in block.all("p")]


async def post_form(client: httpx.AsyncClient, link: dict, **fields: str) -> httpx.Response:
    return await client.post(f"/claim/{link['token']}", data=fields)


class TestClaimPage:
    async def test_the_offer_and_a_form_with_labelled_fields(self, client, tenant):
        event = await create_event(client, tenant, name="Harbour Festival", location="Quay 4")
        expires = int(time.time()) + 3600
        _, link = await claimable(
            client,
            tenant,
            name="Summer pass",
            description="Entry for one, all weekend",
            event_id=event["id"],
            link={"max_claims": 4, "expires_at": expires},
        )
        assert link["url"] == f"http://tessera.test/claim/{link['token']}"
        document = page(await client.get(f"/claim/{link['token']}"), 200)
        assert document.one("title").text == "Claim Summer pass · Tessera"
        assert document.one("h1").text == "Summer pass"
        assert "Entry for one, all weekend" in [p.text for p in document.all("p")]
        section = document.one("section", class_="event")
        assert section.one("h2").text == "Harbour Festival"
        assert "Quay 4, 1 Test Street" in section.text
        assert shown(event["start_date"]) in section.text
        facts = document.one("p", class_="facts")
        assert document.one(id="claims-left").text == "4 claims left"
        assert f"open until {shown(expires)}" in facts.text
        until = facts.one("time").attrs["datetime"]
        assert datetime.fromisoformat(until).timestamp() == expires
        assert document.all(role="alert") == []
        form = document.one("form")
        # No action: the form posts back to the page's own URL, token included.
        assert form.attrs["method"] == "post" and "action" not in form.attrs
        email = document.labelled("Email address")
        assert (email.tag, email.attrs["name"], email.attrs["type"]) == ("input", "email", "email")
        assert email.attrs["value"] == "" and "required" in email.attrs
        assert document.labelled("First name").attrs["name"] == "first_name"
        assert document.labelled("Last name").attrs["name"] == "last_name"
        assert form.one("button").attrs["type"] == "submit"

    async def test_one_claim_left_no_event_no_expiry(self, client, tenant):
        _, link = await claimable(client, tenant, name="Perk", description=None)
        document = page(await client.get(f"/claim/{link['token']}"), 200)
        assert document.one(id="claims-left").text == "1 claim left"
        assert document.all("section") == [] and document.all("time") == []
        assert "open until" not in document.text

    async def test_names_are_escaped(self, client, tenant):
        name = "<script>alert(1)</script>"
        _, link = await claimable(client, tenant, name=name, description='"quoted" & <b>bold</b>')
        response = await client.get(f"/claim/{link['token']}")
        document = page(response, 200)
        assert document.one("h1").text == name
        assert document.all("script") == [] and document.all("b") == []
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text
        assert "<script>" not in response.text

    async def test_an_unknown_token(self, client, tenant):
        for token in ("tcl_unknown", "x" * 300):
            document = page(await client.get(f"/claim/{token}"), 404)
            assert document.one("title").text == "This claim link does not exist · Tessera"
            assert refusal(document) == (
                "This claim link does not exist",
                ["Check that the address is complete, or ask for a new link."],
            )
            assert document.all("form") == []

    async def test_a_revoked_link_is_as_unknown(self, client, tenant):
        product, link = await claimable(client, tenant)
        revoked = await client.delete(
            f"/v1/products/{product['id']}/claim-links/{link['id']}", headers=tenant.w
        )
        assert revoked.status_code == 200
        document = page(await client.get(f"/claim/{link['token']}"), 404)
        assert refusal(document)[0] == "This claim link does not exist"

    async def test_expired(self, client, tenant, database):
        _, link = await claimable(client, tenant)
        await expire(database, link["id"])
        document = page(await client.get(f"/claim/{link['token']}"), 410)
        assert refusal(document) == (
            "This claim link can no longer be used",
            ["This claim link has expired."],
        )
        assert document.all("form") == []

    async def test_used_up(self, client, tenant, limiter):
        _, link = await claimable(client, tenant)
        assert (await post_form(client, link, email="first@example.com")).status_code == 201
        document = page(await client.get(f"/claim/{link['token']}"), 410)
        assert refusal(document) == (
            "This claim link can no longer be used",
            ["This claim link is used up: every claim it allows was made."],
        )


class TestClaimFromPage:
    async def test_a_valid_email_claims_the_item(self, client, tenant, limiter):
        product, link = await claimable(client, tenant, name="Gold badge", link={"max_claims": 3})
        response = await post_form(
            client, link, email="  Ada@Example.com ", first_name="Ada", last_name="Lovelace"
        )
        document = page(response, 201)
        assert document.one("title").text == "You have claimed Gold badge · Tessera"
        block = document.one(role="status")
        assert block.one("h1").text == "You have claimed Gold badge"
        assert [p.text for p in block.all("p")] == [
            "Item #1 is held for ada@example.com.",  # the address as kept: trimmed, lower case
            "Your ticket is ready: open it now and keep its page, it is what you show at the door.",
        ]
        ticket = document.one("a")
        assert ticket.text == "Open your ticket"
        assert ticket.attrs["href"].startswith("http://tessera.test/tickets/")
        assert document.all("form") == [] and document.all(role="alert") == []
        # The JSON API sees the claim: counted on the link, an activated user with the item.
        link_now = await client.get(
            f"/v1/products/{product['id']}/claim-links/{link['id']}", headers=tenant.r
        )
        assert (link_now.json()["claims"], link_now.json()["status"]) == (1, "active")
        profile = await client.post(
            "/v1/users/profile", headers=tenant.r, json={"email": "ada@example.com"}
        )
        assert profile.status_code == 200
        user = profile.json()
        assert (user["firstName"], user["lastName"], user["isActivated"]) == (
            "Ada",
            "Lovelace",
            True,
        )
        # The next person gets the next item; the page shows one claim fewer left.
        second = page(await post_form(client, link, email="bob@example.com"), 201)
        assert "Item #2 is held for bob@example.com." in second.text
        offer = page(await client.get(f"/claim/{link['token']}"), 200)
        assert offer.one(id="claims-left").text == "1 claim left"

    async def test_the_same_email_again_gets_the_same_item(self, client, tenant, limiter, database):
        _, link = await claimable(client, tenant, name="Gold badge")
        page(await post_form(client, link, email="twice@example.com"), 201)
        counts = await row_counts(database)
        # The link is used up now, but not for the person who used it.
        document = page(await post_form(client, link, email="TWICE@example.com"), 200)
        block = document.one(role="status")
        assert block.one("h1").text == "You already claimed Gold badge"
        assert [p.text for p in block.all("p")] == [
            "Item #1 is held for twice@example.com.",
            "It was claimed through this link before; this is the same item.",
        ]
        # Anyone with the link can send that email again: the item, not its ticket.
        assert document.all("a") == []
        assert await row_counts(database) == counts

    @pytest.mark.parametrize(
        ("fields", "error"),
        [
            ({"email": "nope", "first_name": "Ada"}, "Email address: value is not a valid email"),
            ({"email": "", "last_name": "Lovelace"}, "Email address: value is not a valid email"),
            ({"email": 'x"><b>bold</b>'}, "Email address: value is not a valid email"),
            (
                {"email": "ok@example.com", "first_name": "A" * 256},
                "First name: String should have at most 255 characters",
            ),
        ],
    )
    async def test_an_invalid_form_is_shown_again_with_the_error(
        self, client, tenant, limiter, database, fields, error
    ):
        _, link = await claimable(client, tenant, name="Gold badge")
        counts = await row_counts(database)
        document = page(await post_form(client, link, **fields), 400)
        assert document.one("title").text == "Error: Claim Gold badge · Tessera"
        assert document.one("h1").text == "Gold badge"
        alert = document.one(role="alert")
        assert alert.attrs["id"] == "form-errors"
        assert alert.one("h2").text == "Please check the form"
        [message] = [li.text for li in alert.all("li")]
        assert message.startswith(error), message
        form = document.one("form")
        assert form.attrs["aria-describedby"] == "form-errors"
        assert document.all("b") == []  # what was typed comes back as text, never as markup
        for name in ("email", "first_name", "last_name"):
            assert form.one("input", name=name).attrs["value"] == fields.get(name, "")
        assert await row_counts(database) == counts

    async def test_a_link_for_another_email(self, client, tenant, limiter, database):
        _, link = await claimable(client, tenant, link={"email": "only@example.com"})
        counts = await row_counts(database)
        document = page(await post_form(client, link, email="other@example.com"), 403)
        assert refusal(document) == (
            "This link is for someone else",
            ["This claim link was made for another email address."],
        )
        assert await row_counts(database) == counts

    async def test_out_of_stock(self, client, tenant, limiter, database):
        _, link = await claimable(client, tenant, stock=1, link={"max_claims": 2})
        page(await post_form(client, link, email="first@example.com"), 201)
        counts = await row_counts(database)
        document = page(await post_form(client, link, email="second@example.com"), 409)
        assert refusal(document) == (
            "Out of stock",
            ["Product is out of stock: 0 left, 1 requested."],
        )
        assert await row_counts(database) == counts

    async def test_an_expired_link(self, client, tenant, limiter, database):
        _, link = await claimable(client, tenant)
        await expire(database, link["id"])
        document = page(await post_form(client, link, email="late@example.com"), 410)
        assert refusal(document)[1] == ["This claim link has expired."]

    async def test_an_unknown_token(self, client, tenant, limiter):
        response = await client.post("/claim/tcl_nope", data={"email": "a@example.com"})
        assert refusal(page(response, 404))[0] == "This claim link does not exist"

    async def test_too_many_attempts_from_one_address(self, app, tenant):
        app.state.claim_limiter = ClaimLimiter(per_address=1, per_link=100)
        try:
            async with from_address(app, "10.0.3.1") as client:
                _, link = await claimable(client, tenant, link={"max_claims": 5})
                page(await post_form(client, link, email="one@example.com"), 201)
                response = await post_form(client, link, email="two@example.com")
                document = page(response, 429)
                assert 1 <= int(response.headers["retry-after"]) <= 60
                assert refusal(document) == (
                    "Too many attempts",
                    ["Too many claims from this address: at most 1 a minute."],
                )
                # "Try again" reloads the page (a GET, which is not rate-limited).
                assert document.one("a").text == "Try again"
        finally:
            settings = app.state.settings
            app.state.claim_limiter = ClaimLimiter(
                per_address=settings.claim_rate_per_address, per_link=settings.claim_rate_per_link
            )
