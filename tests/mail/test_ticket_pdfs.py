"""Ticket email and printable tickets: every ticket email links to each ticket's PDF (text and
HTML); a project with ``ticket_pdf_in_emails`` gets each ticket's PDF attached too
(``ticket-<item number>.pdf``), rendered when the mail is sent, on the project's paper, its
QR code the ticket's secret. A ticket reissued before its mail went is not attached."""

from tessera.db import database_of
from tessera.projects.service import set_project_rules
from tests.factories import (
    create_event,
    create_order,
    create_product,
    create_user,
    issue_items,
)
from tests.mail.conftest import PDF_LINK, mails, make_postman, send_until
from tests.tickets.pdf import codes, media_boxes


async def ticket_of(client, tenant, product_id: str, number: int) -> dict:
    response = await client.get(
        f"/v1/products/{product_id}/items/{number}/ticket", headers=tenant.r
    )
    assert response.status_code == 200, response.text
    return response.json()


async def pdfs_on(app, tenant, **rules) -> None:
    await set_project_rules(
        database_of(app), project_id=tenant.project_id, ticket_pdf_in_emails=True, **rules
    )


async def sent(postman, smtp, count: int) -> None:
    await send_until(postman, lambda: len(smtp.received) >= count)
    assert await postman.send_due() == 0
    assert len(smtp.received) == count


class TestTicketPdfsInEmail:
    async def test_attached_when_the_project_asks(self, client, mail_app, tenant, smtp, postman):
        await pdfs_on(mail_app, tenant)
        event = await create_event(client, tenant, name="Harbour Nights", location="Pier 4")
        product = await create_product(client, tenant, name="Gala", event_id=event["id"])
        ada = await create_user(client, tenant, firstName="Ada")
        await issue_items(client, tenant, product["id"], ada["id"], ada["id"])
        await sent(postman, smtp, 1)
        [received] = smtp.received
        tickets = [await ticket_of(client, tenant, product["id"], n) for n in (1, 2)]
        attached = received.attachments()
        assert [(name, kind) for name, kind, _ in attached] == [
            ("ticket-1.pdf", "application/pdf"),
            ("ticket-2.pdf", "application/pdf"),
        ]
        for (_, _, pdf), ticket in zip(attached, tickets, strict=True):
            assert pdf.startswith(b"%PDF-")
            assert media_boxes(pdf) == [(595, 842)]
            assert codes(pdf) == [[ticket["secret"]]]
        # The links to print from too, as in every ticket email.
        assert received.links(PDF_LINK) == [f"{t['url']}/ticket.pdf" for t in tickets]
        # Settled, the mail keeps neither its bodies nor the tickets it named.
        [mail] = await mails(database_of(mail_app))
        assert (mail.status, mail.text_body, mail.ticket_pdfs) == ("sent", "", None)

    async def test_on_the_projects_paper(self, client, mail_app, tenant, smtp, postman):
        await pdfs_on(mail_app, tenant, paper="letter")
        product = await create_product(client, tenant, name="Gala")
        user = await create_user(client, tenant)
        await issue_items(client, tenant, product["id"], user["id"])
        await sent(postman, smtp, 1)
        [(name, _, pdf)] = smtp.received[0].attachments()
        assert name == "ticket-1.pdf" and media_boxes(pdf) == [(612, 792)]
        ticket = await ticket_of(client, tenant, product["id"], 1)
        assert codes(pdf) == [[ticket["secret"]]]

    async def test_off_by_default_the_links_only(self, client, mail_app, tenant, smtp, postman):
        product = await create_product(client, tenant, name="Gala")
        user = await create_user(client, tenant)
        await issue_items(client, tenant, product["id"], user["id"])
        [mail] = await mails(database_of(mail_app))
        assert mail.ticket_pdfs is None
        await sent(postman, smtp, 1)
        [received] = smtp.received
        assert received.attachments() == []
        ticket = await ticket_of(client, tenant, product["id"], 1)
        [link] = received.links(PDF_LINK)
        assert link == f"{ticket['url']}/ticket.pdf"
        response = await client.get(link)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/pdf"
        assert codes(response.content) == [[ticket["secret"]]]

    async def test_a_ticket_reissued_before_its_mail_went_is_not_attached(
        self, client, mail_app, tenant, smtp, postman
    ):
        await pdfs_on(mail_app, tenant)
        product = await create_product(client, tenant, name="Gala")
        user = await create_user(client, tenant)
        [item] = await issue_items(client, tenant, product["id"], user["id"])
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/{item['item_id']}/ticket/reissue",
            headers=tenant.w,
        )
        assert reissued.status_code == 200, reissued.text
        await sent(postman, smtp, 2)
        by_subject = {received.subject: received for received in smtp.received}
        assert by_subject["Your ticket for Gala"].attachments() == []  # its version moved on
        [(name, _, pdf)] = by_subject["Your new ticket for Gala"].attachments()
        assert name == "ticket-1.pdf"
        assert codes(pdf) == [[reissued.json()["secret"]]]

    async def test_two_products_items_of_one_number(self, client, mail_app, tenant, smtp, postman):
        await pdfs_on(mail_app, tenant)
        gala = await create_product(client, tenant, name="Gala")
        dinner = await create_product(client, tenant, name="Dinner")
        user = await create_user(client, tenant)
        response = await create_order(
            client, tenant, user["id"], (gala["id"], 1), (dinner["id"], 1)
        )
        assert response.status_code == 201, response.text
        await sent(postman, smtp, 1)
        names = [name for name, _, _ in smtp.received[0].attachments()]
        assert sorted(names) == ["ticket-1-2.pdf", "ticket-1.pdf"]

    async def test_a_failed_render_sends_nothing_and_tries_again(
        self, client, mail_app, tenant, smtp, postman
    ):
        await pdfs_on(mail_app, tenant)
        product = await create_product(client, tenant, name="Gala")
        user = await create_user(client, tenant)
        await issue_items(client, tenant, product["id"], user["id"])

        async def broken(project_id, wanted):
            raise RuntimeError("no PDF today")

        failing = make_postman(database_of(mail_app), smtp, ticket_pdfs=broken)
        assert await failing.send_due() == 1
        assert smtp.received == []
        [mail] = await mails(database_of(mail_app))
        assert mail.status == "queued" and mail.attempts == 1
        assert mail.last_error == "the tickets' PDFs: RuntimeError: no PDF today"
        await sent(postman, smtp, 1)  # the next attempt renders them
        [(name, _, _)] = smtp.received[0].attachments()
        assert name == "ticket-1.pdf"
