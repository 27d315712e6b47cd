"""What sends what: each change that gives a user items emails that user once per request, one
link per item, plain text and HTML; a reissue emails the new link; a claim link's invitation
emails its claim URL. Each mail reaches a real SMTP server once, and its links open the pages
they name (fetched through the app). No mail is written when the project does not ask for
ticket email, or when the server sends none."""

import re

import pytest

from tessera.db import database_of
from tests.factories import (
    create_event,
    create_order,
    create_product,
    create_user,
    create_users,
    issue_items,
    row_counts,
    transfer_item,
)
from tests.mail.conftest import CLAIM_LINK, MAIL_FROM, emails_on, mails, send_until


async def ticket_url(client, tenant, product_id: str, item_id: int) -> str:
    """The item's ticket page as the API gives it."""
    response = await client.get(
        f"/v1/products/{product_id}/items/{item_id}/ticket", headers=tenant.r
    )
    assert response.status_code == 200, response.text
    return response.json()["url"]


async def opens_a_ticket(client, url: str, item_number: int) -> None:
    """The link is a ticket page of that item (no credential)."""
    response = await client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert f"#{item_number}" in response.text


async def all_sent(postman, smtp, count: int) -> None:
    await send_until(postman, lambda: len(smtp.received) >= count)
    assert await postman.send_due() == 0  # nothing left to send
    assert len(smtp.received) == count


class TestIssue:
    async def test_two_items_to_one_user_one_email_with_two_links(
        self, client, mail_app, tenant, smtp, postman
    ):
        event = await create_event(client, tenant, name="Harbour Nights", location="Pier 4")
        product = await create_product(client, tenant, name="Gala", event_id=event["id"])
        ada, bob = await create_users(client, tenant, 2)
        items = await issue_items(client, tenant, product["id"], ada["id"], ada["id"], bob["id"])
        await all_sent(postman, smtp, 2)

        by_to = {received.to: received for received in smtp.received}
        assert set(by_to) == {ada["email"], bob["email"]}
        mine = by_to[ada["email"]]
        assert mine.mail_from == "tickets@tessera.test"
        assert mine.message["from"] == MAIL_FROM
        assert mine.message["to"] == ada["email"]
        assert mine.subject == "Your 2 tickets for Harbour Nights"
        assert mine.message["message-id"].endswith("@tessera.test>")
        assert ada["firstName"] in mine.text and ada["firstName"] in mine.html
        assert "Harbour Nights, Pier 4" in mine.text
        links = mine.links()
        ada_items = [item["item_id"] for item in items if item["user"]["id"] == ada["id"]]
        assert links == [await ticket_url(client, tenant, product["id"], n) for n in ada_items]
        for link, number in zip(links, ada_items, strict=True):
            await opens_a_ticket(client, link, number)
        # Each ticket's signed secret too, to type in where a code cannot be scanned.
        for number in ada_items:
            secret = (
                await client.get(
                    f"/v1/products/{product['id']}/items/{number}/ticket", headers=tenant.r
                )
            ).json()["secret"]
            assert secret in mine.text and secret in mine.html

        theirs = by_to[bob["email"]]
        assert theirs.subject == "Your ticket for Harbour Nights"
        [link] = theirs.links()
        assert link == await ticket_url(client, tenant, product["id"], items[2]["item_id"])

        written = await mails(database_of(mail_app))
        assert [(m.status, m.attempts, m.text_body, m.html_body) for m in written] == [
            ("sent", 1, "", ""),  # the bodies (ticket links) are not kept once handed over
            ("sent", 1, "", ""),
        ]
        assert all(m.sent_at is not None and m.last_error is None for m in written)
        assert sorted(m.cause for m in written) == sorted(
            f"items:{items[0]['id']}:{user['id']}" for user in (ada, bob)
        )

    async def test_the_older_call_too(self, client, tenant, smtp, postman):
        product = await create_product(client, tenant, name="Perk")
        user = await create_user(client, tenant)
        response = await client.post(
            "/v1/products/items/create",
            headers=tenant.w,
            json={"product_id": product["id"], "users": [user["id"]]},
        )
        assert response.status_code == 201, response.text
        await all_sent(postman, smtp, 1)
        [received] = smtp.received
        assert received.to == user["email"] and received.subject == "Your ticket for Perk"
        [item] = response.json()["items"]
        assert received.links() == [
            await ticket_url(client, tenant, product["id"], item["item_id"])
        ]

    async def test_names_are_escaped_in_html_and_kept_in_text(self, client, tenant, smtp, postman):
        product = await create_product(client, tenant, name="<b>Gala</b> & more")
        user = await create_user(client, tenant, firstName="<i>Ada</i>")
        await issue_items(client, tenant, product["id"], user["id"])
        await all_sent(postman, smtp, 1)
        [received] = smtp.received
        assert "&lt;b&gt;Gala&lt;/b&gt; &amp; more" in received.html
        assert "&lt;i&gt;Ada&lt;/i&gt;" in received.html
        assert "<b>" not in received.html and "<i>" not in received.html
        assert "<b>Gala</b> & more, item #1" in received.text
        assert received.subject == "Your ticket for <b>Gala</b> & more"

    async def test_a_refused_issue_writes_no_mail(self, client, tenant, database, smtp, postman):
        product = await create_product(client, tenant, stock=1)
        users = await create_users(client, tenant, 2)
        before = await row_counts(database)
        response = await client.post(
            f"/v1/products/{product['id']}/items",
            headers=tenant.w,
            json={"users": [user["id"] for user in users]},
        )
        assert response.status_code == 409
        assert await row_counts(database) == before
        assert await postman.send_due() == 0 and smtp.received == []


class TestOrders:
    async def test_a_completed_order_one_email_for_all_its_lines(
        self, client, mail_app, tenant, smtp, postman
    ):
        gala = await create_product(client, tenant, name="Gala")
        dinner = await create_product(client, tenant, name="Dinner")
        user = await create_user(client, tenant)
        response = await create_order(
            client, tenant, user["id"], (gala["id"], 2), (dinner["id"], 1)
        )
        assert response.status_code == 201, response.text
        order = response.json()
        await all_sent(postman, smtp, 1)
        [received] = smtp.received
        assert received.to == user["email"]
        assert received.subject == "Your 3 tickets"
        assert "Your order is complete" in received.text
        issued = {(item["product_id"], item["item_id"]) for item in order["product_items"]}
        expected = [await ticket_url(client, tenant, p, n) for p, n in sorted(issued)]
        assert sorted(received.links()) == sorted(expected)
        [mail] = await mails(database_of(mail_app))
        assert mail.cause == f"order:{order['id']}:{user['id']}"

    async def test_a_seated_order_says_each_seat_transferred_too(
        self, client, tenant, smtp, postman
    ):
        event = await create_event(client, tenant)
        seats = [{"number": str(n), "category": "front"} for n in (4, 5)]
        plan = {"areas": [{"name": "Stalls", "rows": [{"name": "B", "seats": seats}]}]}
        seating = f"/v1/events/{event['id']}/seating"
        assert (await client.put(seating, headers=tenant.w, json=plan)).status_code == 200
        product = await create_product(
            client, tenant, name="Gala", event_id=event["id"], seat_category="front"
        )
        product = (
            await client.patch(
                f"/v1/products/{product['id']}", headers=tenant.w, json={"is_transferable": True}
            )
        ).json()
        buyer, friend = await create_users(client, tenant, 2)
        hold = await client.post(
            "/v1/seat-holds", headers=tenant.w, json={"product_id": product["id"], "count": 2}
        )
        line = {"product_id": product["id"], "quantity": 2, "hold_id": hold.json()["id"]}
        order = await client.post(
            "/v1/orders", headers=tenant.w, json={"user": {"id": buyer["id"]}, "items": [line]}
        )
        assert order.status_code == 201, order.text
        await all_sent(postman, smtp, 1)
        [received] = smtp.received
        for number, seat in ((1, "Stalls, row B, seat 4"), (2, "Stalls, row B, seat 5")):
            assert f"Gala, item #{number}, {seat}" in received.text
            assert f"Seat: {seat}" in received.html
        item = order.json()["product_items"][1]
        moved = await transfer_item(client, tenant, product["id"], item["id"], buyer, friend)
        assert moved.status_code == 200, moved.text
        await all_sent(postman, smtp, 2)
        assert "Gala, item #2, Stalls, row B, seat 5" in smtp.received[1].text

    async def test_a_pending_order_mails_when_it_completes(self, client, tenant, smtp, postman):
        product = await create_product(client, tenant, name="Gala")
        user = await create_user(client, tenant)
        response = await create_order(
            client, tenant, user["id"], (product["id"], 1), status="pending"
        )
        assert response.status_code == 201, response.text
        assert await postman.send_due() == 0 and smtp.received == []
        order_id = response.json()["id"]
        completed = await client.post(f"/v1/orders/{order_id}/complete", headers=tenant.w)
        assert completed.status_code == 200, completed.text
        await all_sent(postman, smtp, 1)
        [received] = smtp.received
        assert received.links() == [await ticket_url(client, tenant, product["id"], 1)]
        cancelled = await create_order(
            client, tenant, user["id"], (product["id"], 1), status="pending"
        )
        await client.post(f"/v1/orders/{cancelled.json()['id']}/cancel", headers=tenant.w)
        assert await postman.send_due() == 0 and len(smtp.received) == 1


class TestClaims:
    async def test_a_claim_emails_its_ticket_once(self, client, tenant, smtp, postman):
        product = await create_product(client, tenant, name="Gala", is_claimable=True)
        link = (
            await client.post(
                f"/v1/products/{product['id']}/claim-links", headers=tenant.w, json={}
            )
        ).json()
        body = {"email": "claimer@example.com", "firstName": "Cleo"}
        claimed = await client.post(f"/v1/claims/{link['token']}", json=body)
        assert claimed.status_code == 201, claimed.text
        again = await client.post(f"/v1/claims/{link['token']}", json=body)
        assert again.status_code == 200
        await all_sent(postman, smtp, 1)
        [received] = smtp.received
        assert received.to == "claimer@example.com"
        assert received.subject == "Your ticket for Gala"
        assert "Hello Cleo," in received.text and "You have claimed a ticket" in received.text
        assert received.links() == [claimed.json()["ticket_url"]]
        await opens_a_ticket(client, claimed.json()["ticket_url"], 1)

    async def test_a_claim_on_the_claim_page_too(self, client, tenant, smtp, postman):
        product = await create_product(client, tenant, name="Gala", is_claimable=True)
        link = (
            await client.post(
                f"/v1/products/{product['id']}/claim-links", headers=tenant.w, json={}
            )
        ).json()
        page = await client.post(
            f"/claim/{link['token']}", data={"email": "page@example.com", "first_name": "Pia"}
        )
        assert page.status_code == 201, page.text
        await all_sent(postman, smtp, 1)
        [received] = smtp.received
        assert received.to == "page@example.com" and "Hello Pia," in received.text
        [link_in_mail] = received.links()
        assert link_in_mail in page.text  # the page leads to the same ticket
        await opens_a_ticket(client, link_in_mail, 1)

    async def test_an_invitation_with_the_claim_url(self, client, mail_app, tenant, smtp, postman):
        event = await create_event(client, tenant, name="Harbour Nights")
        product = await create_product(
            client, tenant, name="Gala", is_claimable=True, event_id=event["id"]
        )
        response = await client.post(
            f"/v1/products/{product['id']}/claim-links",
            headers=tenant.w,
            json={"email": "guest@example.com", "send_email": True},
        )
        assert response.status_code == 201, response.text
        link = response.json()
        assert "send_email" not in link
        await all_sent(postman, smtp, 1)
        [received] = smtp.received
        assert received.to == "guest@example.com"
        assert received.subject == "Claim your ticket for Harbour Nights"
        assert received.links(CLAIM_LINK) == [link["url"]]
        page = await client.get(link["url"])
        assert page.status_code == 200 and "Gala" in page.text
        [mail] = await mails(database_of(mail_app))
        assert mail.cause == f"claim-invite:{link['id']}"

    async def test_no_invitation_unless_asked(self, client, tenant, smtp, postman):
        product = await create_product(client, tenant, is_claimable=True)
        response = await client.post(
            f"/v1/products/{product['id']}/claim-links",
            headers=tenant.w,
            json={"email": "guest@example.com"},
        )
        assert response.status_code == 201, response.text
        assert await postman.send_due() == 0 and smtp.received == []

    async def test_send_email_needs_an_email(self, client, tenant, database):
        product = await create_product(client, tenant, is_claimable=True)
        before = await row_counts(database)
        response = await client.post(
            f"/v1/products/{product['id']}/claim-links",
            headers=tenant.w,
            json={"send_email": True},
        )
        assert response.status_code == 400
        assert response.json() == {"errors": ["send_email: the link needs an email to send it to"]}
        assert await row_counts(database) == before

    async def test_send_email_on_a_server_without_email_is_a_409(self, plain, app, database):
        from tests.factories import make_tenant

        tenant = await make_tenant(app)
        product = await create_product(plain, tenant, is_claimable=True)
        before = await row_counts(database)
        response = await plain.post(
            f"/v1/products/{product['id']}/claim-links",
            headers=tenant.w,
            json={"email": "guest@example.com", "send_email": True},
        )
        assert response.status_code == 409
        assert response.json() == {
            "message": "this server sends no email: TESSERA_SMTP_URL is not set"
        }
        assert await row_counts(database) == before


class TestTransfersAndReissues:
    async def test_a_transfer_in_emails_the_new_holder_the_new_ticket(
        self, client, tenant, smtp, postman
    ):
        product = await create_product(client, tenant, name="Gala", is_transferable=True)
        sender, recipient = await create_users(client, tenant, 2)
        [item] = await issue_items(client, tenant, product["id"], sender["id"])
        await all_sent(postman, smtp, 1)
        old_link = await ticket_url(client, tenant, product["id"], item["item_id"])
        moved = await transfer_item(client, tenant, product["id"], item["id"], sender, recipient)
        assert moved.status_code == 200, moved.text
        await all_sent(postman, smtp, 2)
        received = smtp.received[1]
        assert received.to == recipient["email"]
        assert received.subject == "A ticket was transferred to you: Gala"
        new_link = await ticket_url(client, tenant, product["id"], item["item_id"])
        assert received.links() == [new_link] and new_link != old_link
        await opens_a_ticket(client, new_link, item["item_id"])
        assert (await client.get(old_link)).status_code == 404

    async def test_a_reissue_emails_the_new_link(self, client, mail_app, tenant, smtp, postman):
        product = await create_product(client, tenant, name="Gala")
        user = await create_user(client, tenant)
        [item] = await issue_items(client, tenant, product["id"], user["id"])
        await all_sent(postman, smtp, 1)
        [old_link] = smtp.received[0].links()
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/{item['item_id']}/ticket/reissue",
            headers=tenant.w,
        )
        assert reissued.status_code == 200, reissued.text
        await all_sent(postman, smtp, 2)
        received = smtp.received[1]
        assert received.to == user["email"]
        assert received.subject == "Your new ticket for Gala"
        assert "no longer works" in received.text
        assert received.links() == [reissued.json()["url"]] != [old_link]
        await opens_a_ticket(client, reissued.json()["url"], item["item_id"])
        assert (await client.get(old_link)).status_code == 404
        written = await mails(database_of(mail_app))
        assert written[1].cause == f"reissued:{item['id']}:2:{user['id']}"


class TestNoMail:
    async def test_not_when_the_project_does_not_ask(self, client, mail_app, tenant, smtp, postman):
        await emails_on(mail_app, tenant, on=False)
        product = await create_product(client, tenant, is_transferable=True)
        users = await create_users(client, tenant, 2)
        [item] = await issue_items(client, tenant, product["id"], users[0]["id"])
        response = await create_order(client, tenant, users[0]["id"], (product["id"], 1))
        assert response.status_code == 201
        moved = await transfer_item(client, tenant, product["id"], item["id"], *users)
        assert moved.status_code == 200
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/1/ticket/reissue", headers=tenant.w
        )
        assert reissued.status_code == 200
        assert await mails(database_of(mail_app)) == []
        assert await postman.send_due() == 0 and smtp.received == []

    async def test_not_when_the_server_sends_none(self, plain, app, database):
        from tests.factories import make_tenant

        tenant = await make_tenant(app)
        await emails_on(app, tenant)
        product = await create_product(plain, tenant, is_claimable=True)
        user = await create_user(plain, tenant)
        await issue_items(plain, tenant, product["id"], user["id"])
        link = (
            await plain.post(f"/v1/products/{product['id']}/claim-links", headers=tenant.w, json={})
        ).json()
        claimed = await plain.post(f"/v1/claims/{link['token']}", json={"email": "c@example.com"})
        assert claimed.status_code == 201
        assert await mails(database) == []

    @pytest.mark.parametrize("on", [True, False])
    async def test_the_console_issues_as_the_api(self, client, mail_app, tenant, smtp, postman, on):
        from tests.console.conftest import owner_console

        await emails_on(mail_app, tenant, on=on)
        product = await create_product(client, tenant, name="Gala")
        user = await create_user(client, tenant)
        console = await owner_console(mail_app, tenant)
        response = await console.post(
            f"/console/projects/{tenant.project_id}/products/{product['id']}/items",
            {"emails": user["email"]},
        )
        assert response.status_code == 303, response.text
        await console.http.aclose()
        written = await mails(database_of(mail_app))
        assert len(written) == (1 if on else 0)
        if on:  # the links lead where the console's request came to
            await all_sent(postman, smtp, 1)
            from_console = re.compile(
                r"http://127\.0\.0\.1/tickets/[A-Za-z0-9_-]{43}(?![A-Za-z0-9_/-])"
            )
            api_link = await ticket_url(client, tenant, product["id"], 1)
            assert smtp.received[0].links(from_console) == [
                api_link.replace("http://tessera.test", "http://127.0.0.1")
            ]
