"""Sending: the worker's rounds hand each due mail to the SMTP server once. While the server is
down or answers 4xx the mail waits, with its last error, and is retried (5 s, doubling, up to
5 minutes, for 3 days); a 5xx answer fails it at once with a ``mail.failed`` change. Any number
of senders send a mail once; one handed to the server and never settled is never sent again,
one taken by a sender that died before is sent when its lease ends. The password of the SMTP
URL appears in no log and no error."""

import asyncio
import logging
import time
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr, ValidationError
from sqlalchemy import update

from tessera.config import Settings
from tessera.db import database_of
from tessera.jobs.worker import JobContext
from tessera.mail import repository
from tessera.mail.sender import Postman, retry_delay
from tessera.main import make_worker
from tessera.models import Mail
from tessera.models.base import utcnow
from tests import orm
from tests.changes.feed import shown
from tests.factories import create_product, create_user, create_users, issue_items
from tests.mail.conftest import (
    DROP,
    MAIL_FROM,
    SMTP_PASSWORD,
    SMTP_USER,
    mails,
    make_postman,
    send_until,
)


async def one_mail(client, tenant) -> dict:
    """A ticket email written (not sent): the user it is for."""
    product = await create_product(client, tenant, name="Gala")
    user = await create_user(client, tenant)
    await issue_items(client, tenant, product["id"], user["id"])
    return user


def gauge(text: str) -> dict[str, float]:
    return {
        sample.labels["status"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "tessera_mails"
    }


class TestRetries:
    async def test_a_server_down_keeps_the_mail_queued_and_it_arrives_once_when_back(
        self, client, mail_app, tenant, smtp, postman
    ):
        user = await one_mail(client, tenant)
        smtp.stop()
        assert await postman.send_due() == 1
        [mail] = await mails(database_of(mail_app))
        assert (mail.status, mail.attempts, mail.sent_at) == ("queued", 1, None)
        assert mail.last_error.startswith(f"smtp://127.0.0.1:{smtp.port}: SMTPConnectError: ")
        assert mail.text_body and mail.html_body  # kept for the next attempt

        await asyncio.sleep(0.1)
        assert await postman.send_due() == 1  # due again: tried again, refused again
        [mail] = await mails(database_of(mail_app))
        assert (mail.status, mail.attempts) == ("queued", 2)

        smtp.start()
        await send_until(postman, lambda: len(smtp.received) >= 1)
        for _ in range(5):
            await postman.send_due()
        [received] = smtp.received
        assert received.to == user["email"]
        [mail] = await mails(database_of(mail_app))
        assert (mail.status, mail.attempts) == ("sent", 3)
        assert mail.sent_at is not None
        assert "SMTPConnectError" in mail.last_error  # what went wrong on the way

    async def test_the_first_retry_within_5_s_then_doubling_up_to_5_minutes(
        self, client, mail_app, tenant, smtp
    ):
        assert [retry_delay(n, first=5, longest=300) for n in range(1, 10)] == [
            5, 10, 20, 40, 80, 160, 300, 300, 300,
        ]  # fmt: skip
        await one_mail(client, tenant)
        smtp.stop()
        postman = make_postman(database_of(mail_app), smtp, first_retry=5.0, longest_retry=300.0)
        before = utcnow()
        await postman.send_due()
        [mail] = await mails(database_of(mail_app))
        wait = (mail.next_attempt_at - before).total_seconds()
        assert 4.0 < wait <= 5.5
        assert await postman.send_due() == 0  # not due yet

    async def test_a_4xx_answer_is_retried(self, client, mail_app, tenant, smtp, postman):
        await one_mail(client, tenant)
        smtp.handler.answer = "451 4.3.0 Try again later"
        await postman.send_due()
        [mail] = await mails(database_of(mail_app))
        assert (mail.status, mail.attempts) == ("queued", 1)
        assert mail.last_error == "the server answered 451 4.3.0 Try again later"
        smtp.handler.answer = "250 OK"
        await send_until(postman, lambda: len(smtp.received) == 1)
        [mail] = await mails(database_of(mail_app))
        assert (mail.status, mail.attempts) == ("sent", 2)

    async def test_a_5xx_answer_fails_at_once_with_a_change(
        self, client, mail_app, tenant, smtp, postman
    ):
        user = await one_mail(client, tenant)
        smtp.handler.answer = "554 5.7.1 Message rejected"
        await postman.send_due()
        [mail] = await mails(database_of(mail_app))
        assert (mail.status, mail.attempts, mail.sent_at) == ("failed", 1, None)
        assert mail.last_error == "the server answered 554 5.7.1 Message rejected"
        assert (mail.text_body, mail.html_body) == ("", "")
        smtp.handler.answer = "250 OK"
        await asyncio.sleep(0.1)
        assert await postman.send_due() == 0 and smtp.received == []  # never again

        events = await shown(client, tenant, 4)
        assert [event["type"] for event in events] == [
            "product.created",
            "user.created",
            "item.issued",
            "mail.failed",
        ]
        assert events[-1]["data"] == {
            "id": str(mail.id),
            "to": user["email"],
            "subject": "Your ticket for Gala",
            "cause": mail.cause,
            "attempts": 1,
            "error": "the server answered 554 5.7.1 Message rejected",
            "created_at": events[-1]["data"]["created_at"],
        }
        assert "/tickets/" not in str(events)

    async def test_given_up_after_3_days(self, client, mail_app, tenant, smtp, postman):
        await one_mail(client, tenant)
        database = database_of(mail_app)
        async with orm.session(database) as session:
            three_days_ago = utcnow() - timedelta(days=3, seconds=1)
            await session.execute(update(Mail).values(created_at=three_days_ago))
            await session.commit()
        smtp.stop()
        await postman.send_due()
        [mail] = await mails(database)
        assert (mail.status, mail.attempts) == ("failed", 1)
        assert mail.last_error.startswith("given up after 1 attempts: smtp://127.0.0.1:")
        events = await shown(client, tenant, 4)
        assert events[-1]["type"] == "mail.failed"


class TestOnce:
    async def test_many_senders_send_each_mail_once(self, client, mail_app, tenant, smtp):
        database = database_of(mail_app)
        product = await create_product(client, tenant)
        users = await create_users(client, tenant, 25)
        await issue_items(client, tenant, product["id"], *(user["id"] for user in users))
        senders = [make_postman(database, smtp) for _ in range(3)]
        deadline = time.monotonic() + 20
        while len(smtp.received) < 25 and time.monotonic() < deadline:
            await asyncio.gather(*(sender.send_due() for sender in senders))
        await asyncio.gather(*(sender.send_due() for sender in senders))
        assert sorted(received.to for received in smtp.received) == sorted(
            user["email"] for user in users
        )
        assert {mail.status for mail in await mails(database)} == {"sent"}

    async def test_a_mail_taken_by_a_sender_that_died_is_sent_when_its_lease_ends(
        self, client, mail_app, tenant, smtp, postman
    ):
        """A worker that died after taking a mail, before handing it to the server: the mail
        is not another sender's until the lease ends, then it goes, once."""
        await one_mail(client, tenant)
        database = database_of(mail_app)
        now = utcnow()
        async with database.transaction() as tx:
            [taken] = await repository.take_due(tx, now, now + timedelta(seconds=1))
            await tx.commit()
        assert taken.status == "sending"
        assert await postman.send_due() == 0  # still the dead sender's
        assert smtp.received == []
        await asyncio.sleep(1.1)
        assert await postman.send_due() == 1
        assert len(smtp.received) == 1
        [mail] = await mails(database)
        assert (mail.id, mail.status) == (taken.id, "sent") and mail.sent_at is not None

    async def test_a_mail_handed_over_and_never_settled_is_not_sent_again(
        self, client, mail_app, tenant, smtp, postman
    ):
        """A worker that died between handing a mail over and hearing the server."""
        await one_mail(client, tenant)
        database = database_of(mail_app)
        now = utcnow()
        async with database.transaction() as tx:
            [taken] = await repository.take_due(tx, now, now + timedelta(seconds=1))
            assert await repository.hand_over(tx, taken)
            await tx.commit()
        await asyncio.sleep(1.1)
        assert await postman.send_due() == 0
        assert smtp.received == []
        [mail] = await mails(database)
        assert (mail.id, mail.status, mail.sent_at) == (taken.id, "sent", None)

    async def test_a_sender_whose_lease_was_taken_sends_nothing(
        self, client, mail_app, tenant, smtp, postman
    ):
        """A slow sender whose lease ran out while another sender took the mail."""
        await one_mail(client, tenant)
        database = database_of(mail_app)
        now = utcnow()
        async with database.transaction() as tx:
            [slow] = await repository.take_due(tx, now, now)  # a lease already over
            [other] = await repository.take_due(tx, now, now + timedelta(minutes=10))
            assert not await repository.hand_over(tx, slow)
            assert await repository.hand_over(tx, other)
            await tx.commit()
        assert slow.id == other.id

    async def test_a_mail_whose_answer_never_came_is_not_sent_again(
        self, client, mail_app, tenant, smtp, postman
    ):
        """The server took the message and the connection ended before its answer: nobody can
        tell whether it arrived (it did, here), so it is not sent again."""
        await one_mail(client, tenant)
        smtp.handler.answer = DROP
        await postman.send_due()
        smtp.handler.answer = "250 OK"
        [mail] = await mails(database_of(mail_app))
        assert (mail.status, mail.attempts, mail.sent_at) == ("sent", 1, None)
        assert mail.last_error.startswith(
            "the connection ended while the server took the message: SMTPServerDisconnected"
        )
        await asyncio.sleep(0.1)
        assert await postman.send_due() == 0
        assert len(smtp.received) == 1

        from tests.console.conftest import owner_console

        console = await owner_console(mail_app, tenant)
        page = (await console.get(f"/console/projects/{tenant.project_id}/mail")).text
        await console.http.aclose()
        assert "<td>unconfirmed</td>" in page and "the connection ended" in page

    async def test_one_cause_is_written_once(self, mail_app, tenant):
        database = database_of(mail_app)
        values = {
            "project_id": tenant.project_id,
            "recipient": "a@example.com",
            "subject": "s",
            "text_body": "t",
            "html_body": "h",
            "cause": "claim-invite:x",
        }
        async with database.transaction() as tx:
            assert await repository.add_mail(tx, values) is True
            assert await repository.add_mail(tx, values | {"subject": "again"}) is False
            await tx.commit()
        assert [mail.subject for mail in await mails(database)] == ["s"]


class TestTheWorker:
    async def test_the_worker_sends_beside_its_jobs(self, client, mail_app, tenant, smtp):
        settings = mail_app.state.settings.model_copy(update={"worker_poll_seconds": 0.05})
        state = mail_app.state
        worker = make_worker(JobContext(state.database, state.box, state.chains), settings)
        user = await one_mail(client, tenant)
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run_forever(stop))
        try:
            for _ in range(200):  # 10 s at most: the server is another thread's
                if smtp.received:
                    break
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            await running
        assert [received.to for received in smtp.received] == [user["email"]]

    async def test_no_sender_without_smtp(self, app):
        assert Postman.from_settings(database_of(app), app.state.settings) is None


class TestMetrics:
    async def test_mails_by_status(self, client, mail_app, tenant, smtp, postman):
        empty = gauge((await client.get("/metrics")).text)
        assert empty == {"queued": 0, "sending": 0, "sent": 0, "failed": 0}
        await one_mail(client, tenant)
        await one_mail(client, tenant)
        assert gauge((await client.get("/metrics")).text)["queued"] == 2
        smtp.handler.answer = "550 5.1.1 No such user"
        await postman.send_due()
        assert gauge((await client.get("/metrics")).text) == {
            "queued": 0,
            "sending": 0,
            "sent": 0,
            "failed": 2,
        }
        smtp.handler.answer = "250 OK"
        await one_mail(client, tenant)
        await send_until(postman, lambda: len(smtp.received) == 1)
        assert gauge((await client.get("/metrics")).text) == {
            "queued": 0,
            "sending": 0,
            "sent": 1,
            "failed": 2,
        }


class TestPassword:
    async def test_never_in_a_log_or_an_error(
        self, client, mail_app, tenant, smtp_with_login, caplog
    ):
        caplog.set_level(logging.DEBUG)
        database = database_of(mail_app)
        wrong = make_postman(
            database,
            smtp_with_login,
            smtp_url=smtp_with_login.url(f"{SMTP_USER}:wrong-{SMTP_PASSWORD}@"),
        )
        user = await one_mail(client, tenant)
        await wrong.send_due()  # the login is refused: a server problem, retried
        [mail] = await mails(database)
        assert mail.status == "queued" and "535" in mail.last_error
        assert set(smtp_with_login.attempted) == {f"wrong-{SMTP_PASSWORD}"}

        right = make_postman(
            database, smtp_with_login, smtp_url=smtp_with_login.url(f"{SMTP_USER}:{SMTP_PASSWORD}@")
        )
        await send_until(right, lambda: len(smtp_with_login.received) == 1)
        assert smtp_with_login.received[0].to == user["email"]
        assert SMTP_PASSWORD in smtp_with_login.attempted  # it did log in with it

        from tests.console.conftest import owner_console

        console = await owner_console(mail_app, tenant)
        page = (await console.get(f"/console/projects/{tenant.project_id}/mail")).text
        await console.http.aclose()
        [mail] = await mails(database)
        assert "535" in page
        for text in (caplog.text, mail.last_error or "", page, repr(right.server)):
            assert SMTP_PASSWORD not in text

    async def test_over_starttls_and_tls(self, client, mail_app, tenant, tls_server, certificate):
        """``smtp+starttls://`` and ``smtps://``: the server's certificate is checked (a
        client that does not trust it sends nothing), and the login goes over TLS."""
        tls_server.reset()
        database = database_of(mail_app)
        url = tls_server.url(f"{SMTP_USER}:{SMTP_PASSWORD}@")
        untrusting = make_postman(database, tls_server, smtp_url=url)
        user = await one_mail(client, tenant)
        await untrusting.send_due()
        [mail] = await mails(database)
        assert mail.status == "queued" and "CERTIFICATE_VERIFY_FAILED" in mail.last_error
        assert tls_server.attempted == []  # no password went over an unchecked connection

        trusting = make_postman(
            database, tls_server, smtp_url=url, tls_context=certificate.client_context()
        )
        await send_until(trusting, lambda: len(tls_server.received) == 1)
        assert tls_server.received[0].to == user["email"]
        assert SMTP_PASSWORD in tls_server.attempted

    def test_settings_hide_it(self):
        url = f"smtps://{SMTP_USER}:{SMTP_PASSWORD}@mail.example.org"
        settings = Settings(smtp_url=url, mail_from=MAIL_FROM)
        assert SMTP_PASSWORD not in repr(settings) and SMTP_PASSWORD not in str(settings)
        assert str(settings.smtp) == "smtps://tessera@mail.example.org:465"
        assert settings.smtp is not None and settings.smtp.password is not None
        assert settings.smtp.password.get_secret_value() == SMTP_PASSWORD
        for bad in (
            f"smtps://{SMTP_USER}:{SMTP_PASSWORD}@mail.example.org:99999",
            f"imap://{SMTP_USER}:{SMTP_PASSWORD}@mail.example.org",
            f"smtp://{SMTP_USER}:{SMTP_PASSWORD}@mail.example.org/path",
        ):
            with pytest.raises(ValidationError) as refused:
                Settings(smtp_url=bad, mail_from=MAIL_FROM)
            assert "TESSERA_SMTP_URL" in str(refused.value)
            assert SMTP_PASSWORD not in str(refused.value)
            assert SMTP_PASSWORD not in repr(refused.value)

    @pytest.mark.parametrize(
        ("url", "shown", "security", "port"),
        [
            ("smtp://127.0.0.1:2525", "smtp://127.0.0.1:2525", "none", 2525),
            ("smtp://mail.example.org", "smtp://mail.example.org:25", "none", 25),
            (
                "smtp+starttls://us%40er:p%3Ass@mail.example.org",
                "smtp+starttls://us@er@mail.example.org:587",
                "starttls",
                587,
            ),
            ("smtps://u:p@mail.example.org:2465", "smtps://u@mail.example.org:2465", "tls", 2465),
        ],
    )
    def test_the_url_forms(self, url, shown, security, port):
        server = Settings(smtp_url=url, mail_from="tickets@example.org").smtp
        assert server is not None
        assert (str(server), server.security, server.port) == (shown, security, port)

    def test_a_url_needs_a_sender(self):
        with pytest.raises(ValidationError, match="TESSERA_SMTP_URL needs TESSERA_MAIL_FROM"):
            Settings(smtp_url="smtp://127.0.0.1:25")
        with pytest.raises(ValidationError, match="TESSERA_MAIL_FROM"):
            Settings(smtp_url="smtp://127.0.0.1:25", mail_from="not an address")
        assert Settings().smtp is None
        assert (
            Settings(smtp_url=SecretStr("smtp://h:1"), mail_from="a@b.org").mail_from == "a@b.org"
        )
