"""The printable ticket: ``GET /tickets/{token}/ticket.pdf`` (no credential, the token is one)
is a PDF of one page, on A4 unless the project prints on Letter, with the event, the product,
the item's number, the holder, the QR code of the ticket's secret and the secret written out,
its fonts embedded. Drawn by poppler, its code decodes to the secret. A token the ticket page
refuses gets that page's 404."""

import base64
import re

import pytest

from tessera.db import database_of
from tessera.projects.service import set_project_rules
from tests.factories import create_product, create_user, issue_items, transfer_item
from tests.tickets.pdf import codes, fonts, media_boxes, pages, text
from tests.tickets.test_ticket_page import (
    FESTIVAL,
    NOT_VALID,
    checked_headers,
    held,
    page,
    path_of,
    refusal,
    ticket_of,
)

A4, LETTER = (595, 842), (612, 792)


async def pdf_of(client, url: str) -> bytes:
    """The ticket's PDF, once its answer is checked."""
    response = await client.get(path_of(url) + "/ticket.pdf")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/pdf"
    assert response.headers["content-disposition"] == 'inline; filename="ticket.pdf"'
    checked_headers(response)
    assert response.content.startswith(b"%PDF-")
    assert response.content.rstrip().endswith(b"%%EOF")
    return response.content


class TestTicketPdf:
    async def test_a_held_tickets_pdf(self, client, tenant):
        _, _, item, ticket = await held(
            client, tenant, event=FESTIVAL, name="Weekend pass", type="admission"
        )
        pdf = await pdf_of(client, ticket["url"])
        # One A4 page whose code, as poppler draws it at 150 dpi, is the ticket's secret.
        assert media_boxes(pdf) == [A4]
        assert codes(pdf) == [[ticket["secret"]]]
        # Its fonts embedded (a TrueType subset each); none of the 14 a reader may substitute.
        assert b"/FontFile2" in pdf
        listed = fonts(pdf)
        assert listed and all(embedded for _, _, embedded in listed)
        assert all(re.fullmatch(r"[A-Z]{6}\+BitstreamVera\S+", name) for name, _, _ in listed)
        for base14 in (b"/Helvetica", b"/Times-Roman", b"/Courier", b"/Symbol"):
            assert base14 not in pdf
        assert b"/Title (Ticket: Weekend pass)" in pdf
        # The same ticket renders to the same bytes: nothing of the moment it was made.
        assert await pdf_of(client, ticket["url"]) == pdf
        # The secret is nowhere in the address; the page links to its PDF by a relative path.
        document = page(await client.get(path_of(ticket["url"])), 200)
        token = path_of(ticket["url"]).removeprefix("/tickets/")
        link = document.one("a", id="pdf")
        assert link.attrs["href"] == f"{token}/ticket.pdf"
        assert link.text == "Print this ticket (PDF)"
        assert item["item_id"] == 1

    async def test_what_the_page_says(self, client, tenant):
        _, user, _, ticket = await held(
            client, tenant, event=FESTIVAL, name="Weekend <pass>", type="admission"
        )
        lines = [line.strip() for line in text(await pdf_of(client, ticket["url"])).splitlines()]
        for expected in (
            "Admission ticket",
            "Weekend <pass>",
            "Harbour Lights Festival",
            "Quay 4, Harbour Road 1, Rotterdam",
            "13 June 2031, 18:00 UTC \N{EN DASH} 15 June 2031, 23:00 UTC",
            "Item #1",
            "Holder: Ada Lovelace",
        ):
            assert expected in lines, f"{expected!r} not in {lines}"
        assert user["email"] not in " ".join(lines)  # the name only, never the email
        # The secret written out in lines of 36 characters, to type in.
        secret = ticket["secret"]
        written = [secret[at : at + 36] for at in range(0, len(secret), 36)]
        assert [line for line in lines if line in written] == written

    async def test_a_holder_without_a_name_and_no_event(self, client, tenant):
        product = await create_product(client, tenant, name="Gold badge")
        user = await create_user(client, tenant, firstName=None, lastName=None)
        [item] = await issue_items(client, tenant, product["id"], user["id"])
        ticket = await ticket_of(client, tenant, product["id"], item["item_id"])
        pdf = await pdf_of(client, ticket["url"])
        assert codes(pdf) == [[ticket["secret"]]]
        assert media_boxes(pdf) == [A4]
        lines = [line.strip() for line in text(pdf).splitlines()]
        assert "Holder: No name given" in lines and "Gold badge" in lines

    async def test_letter_when_the_project_prints_on_letter(self, client, tenant, app):
        _, _, _, ticket = await held(client, tenant, event=FESTIVAL)
        database = database_of(app)
        changed = await set_project_rules(database, project_id=tenant.project_id, paper="letter")
        assert changed.paper == "letter"
        pdf = await pdf_of(client, ticket["url"])
        assert media_boxes(pdf) == [LETTER]
        [image] = pages(pdf)
        assert image.size == (1275, 1650)  # 8.5 x 11 in at 150 dpi
        assert codes(pdf) == [[ticket["secret"]]]
        await set_project_rules(database, project_id=tenant.project_id, paper="a4")
        assert media_boxes(await pdf_of(client, ticket["url"])) == [A4]

    async def test_a_reissued_tickets_old_token_is_the_pages_404(self, client, tenant):
        product, _, item, ticket = await held(client, tenant, event=FESTIVAL)
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/{item['item_id']}/ticket/reissue",
            headers=tenant.w,
        )
        assert reissued.status_code == 200, reissued.text
        document = page(await client.get(path_of(ticket["url"]) + "/ticket.pdf"), 404)
        assert refusal(document) == NOT_VALID
        assert document.one("title").text == "This ticket is not valid · Tessera"
        new = reissued.json()
        assert codes(await pdf_of(client, new["url"])) == [[new["secret"]]]

    async def test_a_transferred_ticket_is_its_new_holders(self, client, tenant):
        product, sender, item, ticket = await held(client, tenant, is_transferable=True)
        recipient = await create_user(client, tenant, firstName="Grace", lastName="Hopper")
        moved = await transfer_item(client, tenant, product["id"], item["id"], sender, recipient)
        assert moved.status_code == 200, moved.text
        document = page(await client.get(path_of(ticket["url"]) + "/ticket.pdf"), 404)
        assert refusal(document) == NOT_VALID
        now = await ticket_of(client, tenant, product["id"], item["item_id"])
        assert codes(await pdf_of(client, now["url"])) == [[now["secret"]]]

    @pytest.mark.parametrize(
        "token",
        ["x", "x" * 43, "A" * 300, base64.urlsafe_b64encode(bytes(32)).decode().rstrip("=")],
    )
    async def test_unknown_tokens_are_the_pages_404(self, client, tenant, token):
        await held(client, tenant)
        document = page(await client.get(f"/tickets/{token}/ticket.pdf"), 404)
        assert refusal(document) == NOT_VALID
        assert page(await client.get(f"/tickets/{token}"), 404).text == document.text

    async def test_the_secret_is_not_a_token(self, client, tenant):
        _, _, _, ticket = await held(client, tenant)
        document = page(await client.get(f"/tickets/{ticket['secret']}/ticket.pdf"), 404)
        assert refusal(document) == NOT_VALID
