"""Idempotent writes: ``Idempotency-Key`` on every POST, PUT, PATCH and DELETE."""

import asyncio
import json
import os
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from tessera.idempotency.service import purge_expired
from tessera.jobs.worker import JobContext
from tessera.main import make_worker
from tessera.models import IdempotencyKey, User
from tessera.models.base import utcnow
from tessera.web.routes import fingerprint
from tests import orm
from tests.conftest import BACKEND
from tests.factories import (
    create_event,
    create_product,
    create_user,
    event_body,
    row_counts,
    user_body,
)
from tests.serving import fresh_database, serve, settings_env, tessera


def keyed(tenant, key: str) -> dict[str, str]:
    return tenant.w | {"Idempotency-Key": key}


async def count(database, model) -> int:
    async with orm.session(database, write=False) as session:
        return await session.scalar(select(func.count()).select_from(model)) or 0


async def records(database) -> list[IdempotencyKey]:
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(IdempotencyKey)))


class TestReplay:
    async def test_a_retry_gets_the_first_answer_and_changes_nothing(
        self, client, tenant, database
    ):
        body = [user_body()]
        first = await client.post("/v1/users/create", headers=keyed(tenant, "k-1"), json=body)
        assert first.status_code == 201
        assert "idempotent-replayed" not in first.headers
        counts = await row_counts(database)
        again = await client.post("/v1/users/create", headers=keyed(tenant, "k-1"), json=body)
        assert again.status_code == 201
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json() == first.json()
        assert again.headers["content-type"] == "application/json"
        assert again.headers["x-request-id"] != first.headers["x-request-id"]
        assert await row_counts(database) == counts

    async def test_a_refusal_is_replayed_too(self, client, tenant, database):
        user = await create_user(client, tenant)
        product = await create_product(client, tenant, stock=1)
        path = f"/v1/products/{product['id']}/items"
        body = {"users": [user["id"], user["id"]]}
        first = await client.post(path, headers=keyed(tenant, "two"), json=body)
        assert first.status_code == 409
        again = await client.post(path, headers=keyed(tenant, "two"), json=body)
        assert (again.status_code, again.json()) == (409, first.json())
        assert again.headers["idempotent-replayed"] == "true"

    async def test_every_write_method(self, client, tenant):
        product = await create_product(client, tenant)
        path = f"/v1/products/{product['id']}"
        first = await client.patch(path, headers=keyed(tenant, "p"), json={"name": "Renamed"})
        assert first.status_code == 200
        again = await client.patch(path, headers=keyed(tenant, "p"), json={"name": "Renamed"})
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()["updated_at"] == first.json()["updated_at"]

    async def test_reads_ignore_the_header(self, client, tenant, database):
        response = await client.get("/v1/products", headers=keyed(tenant, "r"))
        assert response.status_code == 200 and "idempotent-replayed" not in response.headers
        assert await records(database) == []

    async def test_without_a_key_every_request_runs(self, client, tenant, database):
        for _ in range(2):
            response = await client.post("/v1/users/create", headers=tenant.w, json=[user_body()])
            assert response.status_code == 201
        assert await count(database, User) == 2
        assert await records(database) == []

    async def test_a_delete_is_replayed_with_its_empty_answer(self, client, tenant, database):
        event = await create_event(client, tenant)
        path = f"/v1/events/{event['id']}"
        first = await client.delete(path, headers=keyed(tenant, "d"))
        assert (first.status_code, first.content) == (204, b"")
        again = await client.delete(path, headers=keyed(tenant, "d"))
        assert (again.status_code, again.content) == (204, b"")
        assert again.headers["idempotent-replayed"] == "true"
        [record] = await records(database)
        assert (record.status_code, record.body) == (204, b"")

    async def test_a_method_the_path_does_not_answer_is_405_whatever_the_key(
        self, client, tenant, database
    ):
        for key in ("k", "has space"):
            response = await client.put(
                "/v1/events/attendees/register", headers=keyed(tenant, key), json={}
            )
            assert response.status_code == 405
            assert response.headers["allow"] == "POST"
            assert response.json() == {
                "message": "PUT is not allowed on /v1/events/attendees/register: it answers POST"
            }
        assert await records(database) == []


class TestRefusals:
    async def test_the_same_key_with_another_body_is_422(self, client, tenant, database):
        first = await client.post(
            "/v1/users/create", headers=keyed(tenant, "k"), json=[user_body()]
        )
        assert first.status_code == 201
        counts = await row_counts(database)
        other = await client.post(
            "/v1/users/create", headers=keyed(tenant, "k"), json=[user_body()]
        )
        assert other.status_code == 422
        assert other.json() == {
            "message": "this Idempotency-Key was used for another request (method, path, query "
            "or body): use a new key for a new request"
        }
        assert await row_counts(database) == counts

    async def test_the_same_key_on_another_path_is_422(self, client, tenant):
        assert (
            await client.post("/v1/events/create", headers=keyed(tenant, "k"), json={})
        ).status_code == 400
        response = await client.post("/v1/products", headers=keyed(tenant, "k"), json={})
        assert response.status_code == 422

    async def test_keys_belong_to_a_project(self, client, tenant, other):
        body = [user_body()]
        mine = await client.post("/v1/users/create", headers=keyed(tenant, "k"), json=body)
        theirs = await client.post("/v1/users/create", headers=keyed(other, "k"), json=body)
        assert (mine.status_code, theirs.status_code) == (201, 201)
        assert "idempotent-replayed" not in theirs.headers
        assert mine.json()["users"][0]["id"] != theirs.json()["users"][0]["id"]

    @pytest.mark.parametrize("key", ["", "has space", "x" * 256, "é"])
    async def test_a_malformed_key_is_400(self, client, tenant, database, key):
        response = await client.post(
            "/v1/users/create",
            headers=[*tenant.w.items(), ("Idempotency-Key", key.encode())],
            json=[user_body()],
        )
        assert response.status_code == 400
        assert response.json() == {
            "errors": ["Idempotency-Key: 1-255 printable ASCII characters, no spaces"]
        }
        assert await count(database, User) == 0

    async def test_a_body_over_the_limit_is_413_and_not_recorded(
        self, client, tenant, database, settings
    ):
        users = [user_body(first_name="x" * 200) for _ in range(settings.max_body_bytes // 200)]
        payload = json.dumps(users).encode()
        assert len(payload) > settings.max_body_bytes

        async def chunks():  # no Content-Length: the limit is met while the body is read
            for start in range(0, len(payload), 8192):
                yield payload[start : start + 8192]

        headers = keyed(tenant, "big") | {"content-type": "application/json"}
        response = await client.post("/v1/users/create", headers=headers, content=chunks())
        assert response.status_code == 413
        assert await records(database) == []
        assert await count(database, User) == 0

    async def test_no_or_a_read_credential_is_refused_as_usual_and_not_recorded(
        self, client, tenant, database
    ):
        body = [user_body()]
        no_credential = await client.post(
            "/v1/users/create", headers={"Idempotency-Key": "k"}, json=body
        )
        assert no_credential.status_code == 401
        read = await client.post(
            "/v1/users/create", headers=tenant.r | {"Idempotency-Key": "k"}, json=body
        )
        assert read.status_code == 403
        assert await records(database) == []
        # The key is still free for the request with the right credential.
        written = await client.post("/v1/users/create", headers=keyed(tenant, "k"), json=body)
        assert written.status_code == 201


class TestLifecycle:
    async def test_while_the_first_runs_a_retry_is_409(self, client, tenant, database):
        body = json.dumps([user_body()]).encode()
        scope = {"method": "POST", "path": "/v1/users/create", "query_string": b""}
        await _record(
            database,
            tenant,
            "busy",
            running_for=timedelta(minutes=1),
            request=fingerprint(scope, body),
        )
        response = await client.post(
            "/v1/users/create",
            headers=keyed(tenant, "busy") | {"content-type": "application/json"},
            content=body,
        )
        assert response.status_code == 409
        assert response.json() == {
            "message": "a request with this Idempotency-Key is still running; retry when it has "
            "answered"
        }
        assert await count(database, User) == 0

    async def test_an_abandoned_or_expired_key_runs_again(self, client, tenant, database):
        await _record(database, tenant, "gone", running_for=timedelta(seconds=-1))
        await _record(database, tenant, "old", status=201, expires_in=timedelta(seconds=-1))
        for key in ("gone", "old"):
            response = await client.post(
                "/v1/users/create", headers=keyed(tenant, key), json=[user_body()]
            )
            assert response.status_code == 201 and "idempotent-replayed" not in response.headers
        assert await count(database, User) == 2
        assert {r.status_code for r in await records(database)} == {201}

    async def test_an_internal_error_is_not_kept(self, client, tenant, database, monkeypatch):
        from tessera.users import service

        async def broken(*args, **kwargs):
            raise RuntimeError("boom")

        body = [user_body()]
        monkeypatch.setattr(service, "create_users", broken)
        failed = await client.post("/v1/users/create", headers=keyed(tenant, "k"), json=body)
        assert failed.status_code == 500
        assert await records(database) == []
        monkeypatch.undo()
        retried = await client.post("/v1/users/create", headers=keyed(tenant, "k"), json=body)
        assert retried.status_code == 201 and "idempotent-replayed" not in retried.headers

    async def test_the_worker_purges_expired_keys(self, app, tenant, database):
        await _record(database, tenant, "old", status=201, expires_in=timedelta(seconds=-1))
        await _record(database, tenant, "new", status=201, expires_in=timedelta(hours=1))
        assert await purge_expired(database) == 1
        assert [r.key for r in await records(database)] == ["new"]
        await _record(database, tenant, "old", status=201, expires_in=timedelta(seconds=-1))
        worker = make_worker(
            JobContext(database, app.state.box, app.state.chains), app.state.settings
        )
        await worker.run_chores()  # the first time, every chore is due
        assert [r.key for r in await records(database)] == ["new"]


class TestConcurrency:
    async def test_fifty_requests_with_one_key_do_the_work_once(self, client, tenant, database):
        body = [user_body()]
        responses = await asyncio.gather(
            *(
                client.post("/v1/users/create", headers=keyed(tenant, "same"), json=body)
                for _ in range(50)
            )
        )
        statuses = [r.status_code for r in responses]
        assert set(statuses) <= {201, 409} and statuses.count(201) >= 1
        created = [r for r in responses if r.status_code == 201]
        assert len({r.json()["users"][0]["id"] for r in created}) == 1
        assert sum("idempotent-replayed" not in r.headers for r in created) == 1
        assert await count(database, User) == 1


def test_across_processes(tmp_path: Path) -> None:
    """Two servers on one database: a key sent to both at once does the work once."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    env = settings_env(
        fresh_database(BACKEND, tmp_path, f"idempotency_{worker}"), worker_in_process=False
    )
    key = tessera("project", "create", "--name", "Twice", env=env)["api_key"]
    headers = {"x-api-key": key, "Idempotency-Key": "once"}
    body = [{"email": "once@example.com"}]
    with serve(env, tmp_path / "a.log") as a, serve(env, tmp_path / "b.log") as b:

        async def both() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as http:
                sends = [
                    http.post(f"{url}/v1/users/create", headers=headers, json=body)
                    for url in (a, b) * 10
                ]
                return await asyncio.gather(*sends)

        responses = asyncio.run(both())
        assert {r.status_code for r in responses} <= {201, 409}
        ran = [
            r for r in responses if r.status_code == 201 and "idempotent-replayed" not in r.headers
        ]
        assert len(ran) == 1
        final = httpx.post(f"{b}/v1/users/create", headers=headers, json=body, timeout=30)
        assert final.status_code == 201 and final.headers["idempotent-replayed"] == "true"
        fetched = httpx.post(
            f"{a}/v1/users/fetch", headers={"x-api-key": key}, json={}, timeout=30
        ).json()
        assert fetched["total"] == 1


def test_a_delete_retried_the_moment_it_answered(tmp_path: Path) -> None:
    """A served DELETE answered 204, retried at once on the same connection: the retry gets
    the kept 204 (the answer is kept before it is sent, so no retry can find it running)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    env = settings_env(
        fresh_database(BACKEND, tmp_path, f"idempotency_delete_{worker}"), worker_in_process=False
    )
    key = tessera("project", "create", "--name", "Deletes", env=env)["api_key"]
    with serve(env, tmp_path / "server.log") as url, httpx.Client(base_url=url) as http:
        for n in range(20):
            created = http.post("/v1/events/create", headers={"x-api-key": key}, json=event_body())
            headers = {"x-api-key": key, "Idempotency-Key": f"delete-{n}"}
            path = f"/v1/events/{created.json()['id']}"
            first = http.delete(path, headers=headers)
            again = http.delete(path, headers=headers)
            assert (first.status_code, "idempotent-replayed" in first.headers) == (204, False)
            assert (again.status_code, again.headers.get("idempotent-replayed")) == (204, "true")


async def _record(
    database,
    tenant,
    key: str,
    *,
    status: int | None = None,
    running_for: timedelta = timedelta(0),
    expires_in: timedelta = timedelta(hours=1),
    request: str = "0" * 64,
) -> None:
    """A key as an earlier request left it (by default, for a request of another body)."""
    now = utcnow()
    async with orm.session(database) as session:
        session.add(
            IdempotencyKey(
                id=uuid.uuid4(),
                project_id=tenant.project_id,
                key=key,
                fingerprint=request,
                status_code=status,
                headers="[]" if status else None,
                body=b"{}" if status else None,
                running_until=now + running_for,
                expires_at=now + expires_in,
            )
        )
        await session.commit()
