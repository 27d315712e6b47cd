"""The project's ``ticket_emails``: off by default, set with `tessera project set
--ticket-emails` (and `--no-ticket-emails`), carried by every kind of credential as
``require_activation`` is (a change is seen within 2 s)."""

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tessera.db import database_of
from tests.factories import create_product, create_user, make_tenant
from tests.mail.conftest import mails

TESSERA = str(Path(sys.executable).with_name("tessera"))


async def tessera(settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {
        "TESSERA_ENV": "test",
        "TESSERA_DATABASE_URL": settings.database_url,
        "TESSERA_SECRET_KEYS": settings.secret_keys.get_secret_value(),
        "TESSERA_HASH_KEY": settings.hash_key.get_secret_value(),
    }
    # In a thread: the CLI waits for this process's transactions on SQLite's write lock.
    return await asyncio.to_thread(
        subprocess.run,
        [TESSERA, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def issue_one(client, database, tenant, headers: dict[str, str]) -> int:
    """An item issued with ``headers``; how many mails the outbox holds then."""
    product = await create_product(client, tenant)
    user = await create_user(client, tenant)
    response = await client.post(
        f"/v1/products/{product['id']}/items", headers=headers, json={"users": [user["id"]]}
    )
    assert response.status_code == 201, response.text
    return len(await mails(database))


class TestProjectSet:
    async def test_off_by_default_and_set_from_the_cli_within_two_seconds(
        self, client, mail_app, mail_settings
    ):
        tenant = await make_tenant(mail_app)  # a new project: ticket email off
        project = str(tenant.project_id)
        assert await issue_one(client, database_of(mail_app), tenant, tenant.w) == 0

        done = await tessera(
            mail_settings, "project", "set", "--project", project, "--ticket-emails"
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {
            "id": project,
            "name": "Acme",
            "require_activation": False,
            "ticket_emails": True,
            "paper": "a4",
            "ticket_pdf_in_emails": False,
        }
        started = time.monotonic()
        while await issue_one(client, database_of(mail_app), tenant, tenant.w) == 0:
            assert time.monotonic() - started < 2.0, "the setting is not applied"
            await asyncio.sleep(0.05)

        done = await tessera(
            mail_settings, "project", "set", "--project", project, "--no-ticket-emails"
        )
        assert json.loads(done.stdout)["ticket_emails"] is False
        mail_app.state.authenticator.cache.clear()  # as the cache's 2 s would
        before = len(await mails(database_of(mail_app)))
        assert await issue_one(client, database_of(mail_app), tenant, tenant.w) == before

    async def test_a_token_clients_jwt_carries_it_too(self, client, mail_app, tenant):
        response = await client.post(
            "/v1/auth/token",
            data={
                "grant_type": "client_credentials",
                "client_id": tenant.client_id,
                "client_secret": tenant.client_secret,
            },
        )
        assert response.status_code == 200, response.text
        bearer = {"Authorization": f"Bearer {response.json()['access_token']}"}
        assert await issue_one(client, database_of(mail_app), tenant, bearer) == 1


class TestPrintableTicketSettings:
    async def test_paper_and_pdfs_in_emails_from_the_cli(self, mail_app, mail_settings):
        tenant = await make_tenant(mail_app)
        project = str(tenant.project_id)
        done = await tessera(
            mail_settings,
            "project",
            "set",
            "--project",
            project,
            "--paper",
            "letter",
            "--ticket-pdf-in-emails",
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {
            "id": project,
            "name": "Acme",
            "require_activation": False,
            "ticket_emails": False,
            "paper": "letter",
            "ticket_pdf_in_emails": True,
        }
        done = await tessera(
            mail_settings, "project", "set", "--project", project, "--no-ticket-pdf-in-emails"
        )
        shown = json.loads(done.stdout)
        assert (shown["paper"], shown["ticket_pdf_in_emails"]) == ("letter", False)
        refused = await tessera(
            mail_settings, "project", "set", "--project", project, "--paper", "a3"
        )
        assert refused.returncode == 2 and "a3" in refused.stderr
