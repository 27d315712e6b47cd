"""Signing in and out, sessions, CSRF, lockout, and who sees which project."""

import uuid

from sqlalchemy import select, update

from tessera.console.service import COOKIE, MAX_FAILURES
from tessera.db import database_of
from tessera.models import ConsoleSession, Operator, Project
from tests import orm
from tests.console.conftest import OPERATOR_EMAIL, OPERATOR_PASSWORD


class TestSignIn:
    async def test_a_page_without_a_session_goes_to_the_sign_in_page(self, app, client):
        response = await client.get("/console/projects/" + str(uuid.uuid4()))
        assert response.status_code == 303
        assert response.headers["location"].startswith("/console/login?next=/console/projects/")
        login = await client.get("/console/login")
        assert login.status_code == 200
        assert 'name="email"' in login.text and 'name="password"' in login.text
        assert 'name="api_key"' in login.text

    async def test_the_cookie_is_http_only_lax_and_secure_off_loopback(self, app, operator):
        from tessera.console.service import create_operator

        await create_operator(database_of(app), email="far@example.com", password="x" * 12)
        import httpx

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://tessera.test") as far:
            response = await far.post(
                "/console/login", data={"email": "far@example.com", "password": "x" * 12}
            )
        cookie = response.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}=")
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" in cookie
        assert "Path=/console" in cookie
        local = operator.http.cookies.jar
        assert [c for c in local if c.name == COOKIE and not c.secure]

    async def test_the_cookie_is_secure_over_https_on_loopback_too(self, app, operator):
        """Behind a proxy on the same machine the host is loopback, but the client spoke HTTPS
        (uvicorn takes the scheme from a trusted ``X-Forwarded-Proto``)."""
        import httpx

        transport = httpx.ASGITransport(app=app)  # the client's address: 127.0.0.1
        answers = {}
        for base_url in ("https://127.0.0.1", "https://localhost", "http://127.0.0.1"):
            async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
                response = await http.post(
                    "/console/login", data={"email": OPERATOR_EMAIL, "password": OPERATOR_PASSWORD}
                )
            assert response.status_code == 303
            cookie = response.headers["set-cookie"]
            assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie
            answers[base_url] = "; secure" in cookie.lower()
        assert answers == {
            "https://127.0.0.1": True,
            "https://localhost": True,
            "http://127.0.0.1": False,
        }

    async def test_a_wrong_password_or_email_is_refused_alike(self, app, operator):
        import httpx

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            wrong = await http.post(
                "/console/login", data={"email": OPERATOR_EMAIL, "password": "not it at all"}
            )
            nobody = await http.post(
                "/console/login", data={"email": "no@example.com", "password": "not it at all"}
            )
        assert wrong.status_code == nobody.status_code == 401
        assert COOKIE not in wrong.headers.get("set-cookie", "")
        assert "wrong email or password" in wrong.text and "wrong email or password" in nobody.text

    async def test_repeated_failures_lock_the_account_even_for_the_right_password(
        self, app, database, operator
    ):
        import httpx

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            for _ in range(MAX_FAILURES):
                refused = await http.post(
                    "/console/login", data={"email": OPERATOR_EMAIL, "password": "guess guess"}
                )
                assert refused.status_code == 401
            locked = await http.post(
                "/console/login", data={"email": OPERATOR_EMAIL, "password": OPERATOR_PASSWORD}
            )
            assert locked.status_code == 401
            async with orm.session(database) as session:  # the lock passes
                await session.execute(update(Operator).values(locked_until=None))
                await session.commit()
            again = await http.post(
                "/console/login", data={"email": OPERATOR_EMAIL, "password": OPERATOR_PASSWORD}
            )
            assert again.status_code == 303

    async def test_sign_out_ends_the_session_for_good(self, app, database, operator):
        cookie = operator.http.cookies.get(COOKIE)
        signed_out = await operator.post("/console/logout")
        assert signed_out.status_code == 303
        assert signed_out.headers["location"].startswith("/console/login")
        async with orm.session(database, write=False) as session:
            assert (await session.scalars(select(ConsoleSession))).all() == []
        import httpx

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", cookies={COOKIE: cookie}
        ) as replay:
            assert (await replay.get("/console")).status_code == 303  # the old cookie is dead

    async def test_a_next_path_never_leaves_the_console(self, app, operator):
        import httpx

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            for target in ("//evil.example", "https://evil.example/console", "/v1/version"):
                response = await http.post(
                    "/console/login",
                    data={"email": OPERATOR_EMAIL, "password": OPERATOR_PASSWORD, "next": target},
                )
                assert response.headers["location"] == "/console", target


class TestCsrf:
    async def test_a_post_without_the_sessions_token_changes_nothing(self, operator, database):
        forged = await operator.http.post(
            "/console/projects", data={"name": "Forged", "csrf": "not-the-token"}
        )
        missing = await operator.http.post("/console/projects", data={"name": "Forged"})
        assert forged.status_code == missing.status_code == 403
        async with orm.session(database, write=False) as session:
            names = (await session.scalars(select(Project.name))).all()
        assert "Forged" not in names


class TestProjects:
    async def test_an_operator_creates_a_project_and_sees_its_secrets_once(self, operator):
        created = await operator.post("/console/projects", {"name": "Harbour Fest"})
        assert created.status_code == 201
        key = created.text.split("<dt>Write API key</dt><dd><code>")[1].split("</code>")[0]
        assert key.startswith("tsk_")
        listed = await operator.get("/console")
        assert "Harbour Fest" in listed.text
        project_id = listed.text.split('">Harbour Fest</a>')[0].rsplit("/console/projects/", 1)[1]
        shown = await operator.get(f"/console/projects/{project_id}")
        assert shown.status_code == 200 and key not in shown.text
        assert key.split("_")[1] in shown.text  # the prefix tells keys apart

    async def test_keys_and_clients_are_created_shown_once_and_revoked(
        self, operator, tenant, client
    ):
        page = f"/console/projects/{tenant.project_id}"
        made = await operator.post(f"{page}/keys", {"permission": "read", "name": "door"})
        assert made.status_code == 201
        key = made.text.split("<dd><code>")[1].split("</code>")[0]
        assert (await client.get("/v1/products", headers={"x-api-key": key})).status_code == 200
        shown = await operator.get(page)
        assert key not in shown.text and "door" in shown.text
        door_row = next(row for row in shown.text.split("<tr>") if "<td>door</td>" in row)
        key_id = door_row.split("/keys/")[1].split("/revoke")[0]
        revoked = await operator.post(f"{page}/keys/{key_id}/revoke")
        assert revoked.status_code == 303
        import asyncio

        for _ in range(40):  # the credential cache lets a key live at most 2 s
            if (await client.get("/v1/products", headers={"x-api-key": key})).status_code == 401:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the revoked key still works")
        client_made = await operator.post(f"{page}/clients", {"permission": "write"})
        assert client_made.status_code == 201 and "Client secret" in client_made.text

    async def test_a_checkin_key_made_here_opens_the_door_alone(self, operator, tenant, client):
        page = f"/console/projects/{tenant.project_id}"
        made = await operator.post(f"{page}/keys", {"permission": "checkin", "name": "gate 2"})
        assert made.status_code == 201
        door = {"x-api-key": made.text.split("<dd><code>")[1].split("</code>")[0]}
        assert (await client.get("/v1/checkins/events", headers=door)).status_code == 200
        assert (await client.get("/v1/products", headers=door)).status_code == 403
        assert "<td>checkin</td>" in (await operator.get(page)).text

    async def test_bad_input_is_a_page_naming_it(self, operator, tenant):
        page = f"/console/projects/{tenant.project_id}"
        refused = await operator.post(
            f"{page}/keys", {"permission": "read", "expires_in_days": "soon"}
        )
        assert refused.status_code == 400 and "expires in days" in refused.text
        empty = await operator.post("/console/projects", {"name": "  "})
        assert empty.status_code == 400


class TestScope:
    async def test_a_project_owner_sees_only_their_project(self, owner, tenant, other):
        mine = await owner.get(f"/console/projects/{tenant.project_id}")
        assert mine.status_code == 200
        theirs = await owner.get(f"/console/projects/{other.project_id}")
        assert theirs.status_code == 404
        home = await owner.http.get("/console")
        assert home.headers["location"] == f"/console/projects/{tenant.project_id}"
        refused = await owner.post("/console/projects", {"name": "Mine now"})
        assert refused.status_code == 403

    async def test_a_read_key_or_a_revoked_key_cannot_sign_in(self, app, tenant, client):
        import httpx

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            read = await http.post("/console/login/key", data={"api_key": tenant.read_key})
            assert read.status_code == 401 and "read key" in read.text
            junk = await http.post("/console/login/key", data={"api_key": "tsk_nope_nope"})
            assert junk.status_code == 401

    async def test_revoking_the_owners_key_ends_the_session(self, owner, tenant, database):
        from tessera.models import ApiKey
        from tessera.models.base import utcnow

        async with orm.session(database) as session:
            await session.execute(
                update(ApiKey)
                .where(ApiKey.project_id == tenant.project_id, ApiKey.permission == "write")
                .values(revoked_at=utcnow())
            )
            await session.commit()
        gone = await owner.http.get(f"/console/projects/{tenant.project_id}")
        assert gone.status_code == 303
