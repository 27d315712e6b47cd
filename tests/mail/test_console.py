"""The console: the project page switches ticket email on and off, and the Email page lists the
project's mails with their status and last error, never their links."""

from tessera.db import database_of
from tessera.models import Project
from tests import orm
from tests.console.conftest import owner_console
from tests.factories import create_product, create_user, issue_items, make_tenant
from tests.mail.conftest import TICKET_LINK, emails_on, mails, send_until


class TestProjectPage:
    async def test_switches_ticket_email_on_and_off(self, client, mail_app, tenant):
        await emails_on(mail_app, tenant, on=False)
        console = await owner_console(mail_app, tenant)
        path = f"/console/projects/{tenant.project_id}"
        shown = await console.get(path)
        assert "Ticket email is <strong>off</strong>" in shown.text
        assert "Turn ticket email on" in shown.text
        assert "TESSERA_SMTP_URL" not in shown.text  # this server sends email

        response = await console.post(f"{path}/ticket-emails", {"ticket_emails": "true"})
        assert response.status_code == 303
        assert response.headers["location"] == f"{path}?notice=Ticket%20email%20is%20on."
        shown = await console.get(path)
        assert "Ticket email is <strong>on</strong>" in shown.text
        assert "Turn ticket email off" in shown.text
        mail_app.state.authenticator.cache.clear()  # as the cache's 2 s would
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        await issue_items(client, tenant, product["id"], user["id"])
        assert [mail.recipient for mail in await mails(database_of(mail_app))] == [user["email"]]

        response = await console.post(f"{path}/ticket-emails", {"ticket_emails": "false"})
        assert response.status_code == 303
        assert "Ticket email is <strong>off</strong>" in (await console.get(path)).text
        await console.http.aclose()

    async def test_says_when_the_server_sends_no_email(self, app):
        tenant = await make_tenant(app)
        console = await owner_console(app, tenant)
        shown = await console.get(f"/console/projects/{tenant.project_id}")
        assert "This server sends no email" in shown.text
        await console.http.aclose()

    async def test_another_project_is_404(self, mail_app, tenant):
        other = await make_tenant(mail_app, name="Other")
        console = await owner_console(mail_app, tenant)
        response = await console.post(
            f"/console/projects/{other.project_id}/ticket-emails", {"ticket_emails": "true"}
        )
        assert response.status_code == 404
        assert (await console.get(f"/console/projects/{other.project_id}/mail")).status_code == 404
        await console.http.aclose()
        async with orm.session(database_of(mail_app), write=False) as session:
            project = await session.get(Project, other.project_id)
            assert project is not None and project.ticket_emails is False

    async def test_a_form_without_its_csrf_token_changes_nothing(self, mail_app, tenant):
        await emails_on(mail_app, tenant, on=False)
        console = await owner_console(mail_app, tenant)
        response = await console.http.post(
            f"/console/projects/{tenant.project_id}/ticket-emails",
            data={"ticket_emails": "true"},
        )
        assert response.status_code == 403
        await console.http.aclose()
        async with orm.session(database_of(mail_app), write=False) as session:
            project = await session.get(Project, tenant.project_id)
            assert project is not None and project.ticket_emails is False


class TestPrintableTickets:
    async def test_switches_the_paper_and_the_pdfs_in_emails(self, mail_app, tenant):
        console = await owner_console(mail_app, tenant)
        path = f"/console/projects/{tenant.project_id}"
        shown = await console.get(path)
        assert 'printed on <strong id="paper">A4</strong>' in shown.text
        assert 'do <strong id="pdf-in-emails">not attach</strong> it' in shown.text
        assert "Print on Letter" in shown.text

        response = await console.post(f"{path}/printing", {"paper": "letter"})
        assert response.status_code == 303
        shown = await console.get(path)
        assert 'printed on <strong id="paper">Letter</strong>' in shown.text
        assert "Print on A4" in shown.text
        response = await console.post(f"{path}/printing", {"ticket_pdf_in_emails": "true"})
        assert response.status_code == 303
        assert "attached%20to%20ticket%20emails" in response.headers["location"]
        shown = await console.get(path)
        assert '<strong id="pdf-in-emails">attach</strong> it' in shown.text
        assert "Stop attaching the PDFs to ticket emails" in shown.text
        refused = await console.post(f"{path}/printing", {"paper": "a3"})
        assert refused.status_code == 400  # the console's answer to a form it cannot take
        await console.http.aclose()
        async with orm.session(database_of(mail_app), write=False) as session:
            project = await session.get(Project, tenant.project_id)
            assert project is not None
            assert (project.paper, project.ticket_pdf_in_emails) == ("letter", True)

    async def test_another_project_is_404(self, mail_app, tenant):
        other = await make_tenant(mail_app, name="Other")
        console = await owner_console(mail_app, tenant)
        response = await console.post(
            f"/console/projects/{other.project_id}/printing", {"paper": "letter"}
        )
        assert response.status_code == 404
        await console.http.aclose()
        async with orm.session(database_of(mail_app), write=False) as session:
            project = await session.get(Project, other.project_id)
            assert project is not None and project.paper == "a4"


class TestEmailPage:
    async def test_lists_the_mails_with_their_last_error_and_no_link(
        self, client, mail_app, tenant, smtp, postman
    ):
        product = await create_product(client, tenant, name="Gala")
        ada = await create_user(client, tenant)
        await issue_items(client, tenant, product["id"], ada["id"])
        smtp.stop()
        await postman.send_due()  # refused: queued again with its error
        console = await owner_console(mail_app, tenant)
        page = await console.get(f"/console/projects/{tenant.project_id}/mail")
        assert page.status_code == 200
        text = page.text
        assert ada["email"] in text and "Your ticket for Gala" in text
        assert "<td>queued</td>" in text and "<td>1</td>" in text
        assert f"smtp://127.0.0.1:{smtp.port}: SMTPConnectError: Error connecting" in text
        assert "next try" in text
        assert not TICKET_LINK.search(text) and "/tickets/" not in text

        smtp.start()
        await send_until(postman, lambda: len(smtp.received) == 1)
        page = await console.get(f"/console/projects/{tenant.project_id}/mail")
        assert "<td>sent</td>" in page.text and "<td>2</td>" in page.text
        assert "/tickets/" not in page.text
        await console.http.aclose()
