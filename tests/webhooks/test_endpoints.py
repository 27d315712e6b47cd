"""Webhook endpoints: register, list, get, change, delete (project credentials); where a URL may
point (https to public addresses only, as deployed: the ``strict`` client)."""

import base64
import uuid

import pytest

from tests.factories import row_counts
from tests.webhooks.conftest import create_webhook

PUBLIC = "https://93.184.216.34/hook"  # an IP literal: registering it looks nothing up
READ_KEYS = {
    "id",
    "url",
    "event_types",
    "status",
    "disabled_reason",
    "failing_since",
    "next_attempt_at",
    "secret_hint",
    "created_at",
    "updated_at",
}
UNKNOWN = "0d9f6c3a-4b1e-4c2f-9a7d-5e8b1f2a3c4d"  # fixed: xdist workers collect alike
NOT_FOUND = {"message": "webhook endpoint not found"}
READ_ONLY = {"message": "this credential is read-only; a write credential is required"}


def hook_url(hook_id: str) -> str:
    return f"/v1/webhooks/{hook_id}"


def without_secret(created: dict) -> dict:
    return {key: value for key, value in created.items() if key != "secret"}


class TestCreateWebhook:
    async def test_needs_a_write_credential(self, client, tenant, database):
        counts = await row_counts(database)
        assert (await client.post("/v1/webhooks", json={"url": PUBLIC})).status_code == 401
        response = await client.post("/v1/webhooks", headers=tenant.r, json={"url": PUBLIC})
        assert response.status_code == 403
        assert response.json() == READ_ONLY
        assert await row_counts(database) == counts

    async def test_the_secret_is_shown_once(self, strict, tenant):
        response = await strict.post("/v1/webhooks", headers=tenant.w, json={"url": PUBLIC})
        assert response.status_code == 201
        created = response.json()
        assert set(created) == READ_KEYS | {"secret"}
        secret = created["secret"]
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
        assert created["secret_hint"] == secret[:10]
        assert created["url"] == PUBLIC
        assert created["event_types"] is None
        assert created["status"] == "enabled"
        assert created["disabled_reason"] is None
        assert created["failing_since"] is None
        assert created["next_attempt_at"] is None
        assert created["created_at"] == created["updated_at"]

        got = await strict.get(hook_url(created["id"]), headers=tenant.r)
        assert got.json() == without_secret(created)
        listed = await strict.get("/v1/webhooks", headers=tenant.r)
        assert listed.json()["webhooks"] == [without_secret(created)]
        assert secret not in got.text + listed.text

    async def test_each_endpoint_has_its_own_secret(self, strict, tenant):
        first = await create_webhook(strict, tenant, PUBLIC)
        second = await create_webhook(strict, tenant, PUBLIC)
        assert first["id"] != second["id"]
        assert first["secret"] != second["secret"]

    async def test_event_types_are_kept_sorted_once(self, strict, tenant):
        types = ["user.created", "item.issued", "user.created"]
        created = await create_webhook(strict, tenant, PUBLIC, event_types=types)
        assert created["event_types"] == ["item.issued", "user.created"]

    async def test_private_addresses_and_http_are_allowed_when_configured(self, client, tenant):
        created = await create_webhook(client, tenant, "http://127.0.0.1:9/hook")
        assert created["url"] == "http://127.0.0.1:9/hook"
        assert created["status"] == "enabled"

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({}, "url: field required"),
            ({"url": 5}, "url: Input should be a valid string"),
            ({"url": "https://a.test/" + "x" * 2048}, "url: String should have at most 2048"),
            ({"url": PUBLIC, "event_types": ["user.made"]}, "event_types.0: Input should be"),
            ({"url": PUBLIC, "event_types": []}, "event_types: List should have at least 1"),
            ({"url": PUBLIC, "event_types": "user.created"}, "event_types: Input should be a"),
            ({"url": PUBLIC, "secret": "whsec_mine"}, "secret: unknown field"),
            ({"url": PUBLIC, "enabled": False}, "enabled: unknown field"),
        ],
    )
    async def test_bounds(self, strict, tenant, database, body, error):
        counts = await row_counts(database)
        response = await strict.post("/v1/webhooks", headers=tenant.w, json=body)
        assert response.status_code == 400
        [message] = response.json()["errors"]
        assert message.startswith(error)
        assert await row_counts(database) == counts

    @pytest.mark.parametrize(
        ("url", "error"),
        [
            ("https://127.0.0.1/", "127.0.0.1 resolves to an address webhooks may not reach: "),
            ("https://127.0.0.1:8443/hook", "127.0.0.1 resolves to an address webhooks may not "),
            ("https://10.0.0.1/", "10.0.0.1 resolves to an address webhooks may not reach: "),
            ("https://172.16.0.1/", "172.16.0.1 resolves to an address webhooks may not reach"),
            ("https://192.168.1.1/", "192.168.1.1 resolves to an address webhooks may not "),
            ("https://169.254.169.254/latest/meta-data/", "169.254.169.254 resolves to an "),
            ("https://100.64.0.1/", "100.64.0.1 resolves to an address webhooks may not "),
            ("https://0.0.0.0/", "0.0.0.0 resolves to an address webhooks may not reach: "),
            ("https://224.0.0.1/", "224.0.0.1 resolves to an address webhooks may not reach"),
            ("https://[::1]/", "::1 resolves to an address webhooks may not reach: ::1"),
            ("https://[fd00::1]/", "fd00::1 resolves to an address webhooks may not reach: "),
            ("https://[fe80::1]/", "fe80::1 resolves to an address webhooks may not reach: "),
            ("https://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1 resolves to an address webhooks"),
            ("https://[::ffff:a9fe:a9fe]/", "::ffff:a9fe:a9fe resolves to an address webhooks"),
            ("https://localhost/", "localhost resolves to an address webhooks may not reach: "),
            ("http://93.184.216.34/hook", "must be an https URL"),
            ("ftp://93.184.216.34/hook", "must be an https URL"),
            ("93.184.216.34/hook", "must be an https URL"),
            ("https:///hook", "must name a host"),
            ("https://user:pw@93.184.216.34/", "must not carry a user name or password"),
            ("https://93.184.216.34/#top", "must not have a fragment"),
            ("https://93.184.216.34/a b", "must not contain spaces"),
            ("https://93.184.216.34:99999/", "not a URL"),
        ],
    )
    async def test_refused_urls_write_nothing(self, strict, tenant, database, url, error):
        counts = await row_counts(database)
        response = await strict.post("/v1/webhooks", headers=tenant.w, json={"url": url})
        assert response.status_code == 400
        [message] = response.json()["errors"]
        assert message.startswith(f"url: {error}")
        assert await row_counts(database) == counts

    async def test_a_refused_address_is_named(self, strict, tenant):
        url = "https://169.254.169.254/latest/meta-data/"
        response = await strict.post("/v1/webhooks", headers=tenant.w, json={"url": url})
        assert response.json() == {
            "errors": [
                "url: 169.254.169.254 resolves to an address webhooks may not reach: "
                "169.254.169.254"
            ]
        }

    @pytest.mark.parametrize(
        ("url", "embedded"),
        [
            ("https://[64:ff9b::a9fe:a9fe]/", "169.254.169.254"),  # NAT64 (RFC 6052)
            ("https://[64:ff9b::a00:1]/", "10.0.0.1"),
            ("https://[64:ff9b:1::a00:1]/", "10.0.0.1"),  # local-use translation (RFC 8215)
        ],
    )
    async def test_ipv4_behind_a_translation_prefix_is_refused(
        self, strict, tenant, database, url, embedded
    ):
        # A NAT64 gateway on the way turns these into the IPv4 address they carry: the
        # metadata service, a private network ("IPv4 inside IPv6", webhooks/addresses.py).
        counts = await row_counts(database)
        response = await strict.post("/v1/webhooks", headers=tenant.w, json={"url": url})
        assert response.status_code == 400, f"{url} carries {embedded}"
        [message] = response.json()["errors"]
        assert "resolves to an address webhooks may not reach" in message
        assert await row_counts(database) == counts

    async def test_a_public_ipv6_literal_is_accepted(self, strict, tenant):
        url = "https://[2606:2800:220:1:248:1893:25c8:1946]/hook"
        assert (await create_webhook(strict, tenant, url))["url"] == url


class TestListWebhooks:
    async def test_needs_a_credential(self, client):
        assert (await client.get("/v1/webhooks")).status_code == 401

    async def test_pages_oldest_first_without_secrets(self, strict, tenant, other):
        made = [await create_webhook(strict, tenant, f"{PUBLIC}/{n}") for n in range(3)]
        await create_webhook(strict, other, PUBLIC)
        first = await strict.get("/v1/webhooks", headers=tenant.r, params={"limit": 2})
        assert first.status_code == 200
        assert first.json() == {
            "webhooks": [without_secret(hook) for hook in made[:2]],
            "pagination": {"page": 1, "limit": 2, "total": 3},
        }
        second = await strict.get("/v1/webhooks", headers=tenant.r, params={"limit": 2, "page": 2})
        assert second.json() == {
            "webhooks": [without_secret(made[2])],
            "pagination": {"page": 2, "limit": 2, "total": 3},
        }
        assert all("secret" not in hook for hook in first.json()["webhooks"])

    async def test_another_projects_endpoints_are_not_listed(self, strict, tenant, other):
        await create_webhook(strict, other, PUBLIC)
        response = await strict.get("/v1/webhooks", headers=tenant.r)
        assert response.json() == {
            "webhooks": [],
            "pagination": {"page": 1, "limit": 20, "total": 0},
        }

    async def test_bad_paging(self, strict, tenant):
        response = await strict.get("/v1/webhooks", headers=tenant.r, params={"limit": 0})
        assert response.status_code == 400
        assert response.json() == {"errors": ["limit: Input should be greater than or equal to 1"]}


class TestGetWebhook:
    async def test_needs_a_credential(self, strict, tenant):
        hook = await create_webhook(strict, tenant, PUBLIC)
        assert (await strict.get(hook_url(hook["id"]))).status_code == 401

    async def test_read_key_reads_it_without_the_secret(self, strict, tenant):
        hook = await create_webhook(strict, tenant, PUBLIC, event_types=["order.created"])
        response = await strict.get(hook_url(hook["id"]), headers=tenant.r)
        assert response.status_code == 200
        assert response.json() == without_secret(hook)

    async def test_unknown_id_is_not_found(self, strict, tenant):
        response = await strict.get(hook_url(str(uuid.uuid4())), headers=tenant.r)
        assert response.status_code == 404
        assert response.json() == NOT_FOUND

    async def test_bad_id(self, strict, tenant):
        response = await strict.get(hook_url("not-a-uuid"), headers=tenant.r)
        assert response.status_code == 400
        [message] = response.json()["errors"]
        assert message.startswith("id: Input should be a valid UUID")


class TestAnotherProjectsEndpoint:
    @pytest.mark.parametrize(
        ("method", "path", "body"),
        [
            ("GET", "", None),
            ("PATCH", "", {"enabled": False}),
            ("PATCH", "", {"url": PUBLIC + "/mine"}),
            ("DELETE", "", None),
            ("GET", "/deliveries", None),
            ("POST", f"/deliveries/{UNKNOWN}/replay", None),
        ],
    )
    async def test_is_not_found_and_untouched(
        self, strict, tenant, other, database, method, path, body
    ):
        hook = await create_webhook(strict, other, PUBLIC)
        counts = await row_counts(database)
        response = await strict.request(
            method, hook_url(hook["id"]) + path, headers=tenant.w, json=body
        )
        assert response.status_code == 404
        assert response.json() == NOT_FOUND
        assert await row_counts(database) == counts
        got = await strict.get(hook_url(hook["id"]), headers=other.r)
        assert got.json() == without_secret(hook)


class TestUpdateWebhook:
    async def test_needs_a_write_credential(self, strict, tenant):
        hook = await create_webhook(strict, tenant, PUBLIC)
        path = hook_url(hook["id"])
        assert (await strict.patch(path, json={"enabled": False})).status_code == 401
        response = await strict.patch(path, headers=tenant.r, json={"enabled": False})
        assert response.status_code == 403
        assert response.json() == READ_ONLY
        assert (await strict.get(path, headers=tenant.r)).json() == without_secret(hook)

    async def test_url_and_event_types(self, strict, tenant):
        hook = await create_webhook(strict, tenant, PUBLIC)
        path = hook_url(hook["id"])
        body = {"url": PUBLIC + "/v2", "event_types": ["order.created", "item.issued"]}
        response = await strict.patch(path, headers=tenant.w, json=body)
        assert response.status_code == 200
        changed = response.json()
        assert changed == without_secret(hook) | {
            "url": PUBLIC + "/v2",
            "event_types": ["item.issued", "order.created"],
            "updated_at": changed["updated_at"],
        }
        assert changed["updated_at"] > hook["updated_at"]
        assert changed["secret_hint"] == hook["secret_hint"]
        assert (await strict.get(path, headers=tenant.r)).json() == changed

        every = await strict.patch(path, headers=tenant.w, json={"event_types": None})
        assert every.json()["event_types"] is None
        assert every.json()["url"] == PUBLIC + "/v2"

    async def test_disable_and_enable(self, strict, tenant):
        hook = await create_webhook(strict, tenant, PUBLIC)
        path = hook_url(hook["id"])
        disabled = await strict.patch(path, headers=tenant.w, json={"enabled": False})
        assert disabled.status_code == 200
        assert disabled.json()["status"] == "disabled"
        assert disabled.json()["disabled_reason"] == "disabled through the API"
        again = await strict.patch(path, headers=tenant.w, json={"enabled": False})
        assert again.json()["disabled_reason"] == "disabled through the API"

        enabled = await strict.patch(path, headers=tenant.w, json={"enabled": True})
        assert enabled.status_code == 200
        assert enabled.json() == without_secret(hook) | {"updated_at": enabled.json()["updated_at"]}
        assert enabled.json()["status"] == "enabled"
        assert enabled.json()["disabled_reason"] is None

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({"event_types": []}, "event_types: List should have at least 1"),
            ({"event_types": ["user.deleted"]}, "event_types.0: Input should be"),
            ({"enabled": "yes"}, "enabled: Input should be a valid boolean"),
            ({"secret": "whsec_mine"}, "secret: unknown field"),
            ({"status": "enabled"}, "status: unknown field"),
            ({"url": "https://10.0.0.1/"}, "url: 10.0.0.1 resolves to an address webhooks may"),
            ({"url": "https://[::1]/"}, "url: ::1 resolves to an address webhooks may not"),
            ({"url": "http://93.184.216.34/hook"}, "url: must be an https URL"),
        ],
    )
    async def test_refused_changes_change_nothing(self, strict, tenant, database, body, error):
        hook = await create_webhook(strict, tenant, PUBLIC)
        counts = await row_counts(database)
        response = await strict.patch(hook_url(hook["id"]), headers=tenant.w, json=body)
        assert response.status_code == 400
        [message] = response.json()["errors"]
        assert message.startswith(error)
        assert await row_counts(database) == counts
        got = await strict.get(hook_url(hook["id"]), headers=tenant.r)
        assert got.json() == without_secret(hook)

    async def test_unknown_id_is_not_found(self, strict, tenant):
        response = await strict.patch(
            hook_url(str(uuid.uuid4())), headers=tenant.w, json={"enabled": False}
        )
        assert response.status_code == 404
        assert response.json() == NOT_FOUND


class TestDeleteWebhook:
    async def test_needs_a_write_credential(self, strict, tenant):
        hook = await create_webhook(strict, tenant, PUBLIC)
        assert (await strict.delete(hook_url(hook["id"]))).status_code == 401
        response = await strict.delete(hook_url(hook["id"]), headers=tenant.r)
        assert response.status_code == 403
        assert response.json() == READ_ONLY
        assert (await strict.get(hook_url(hook["id"]), headers=tenant.r)).status_code == 200

    async def test_deleted_then_not_found(self, strict, tenant, database):
        kept = await create_webhook(strict, tenant, PUBLIC)
        hook = await create_webhook(strict, tenant, PUBLIC)
        response = await strict.delete(hook_url(hook["id"]), headers=tenant.w)
        assert response.status_code == 204
        assert response.content == b""
        assert (await row_counts(database))["webhook_endpoints"] == 1
        for method in ("GET", "DELETE"):
            gone = await strict.request(method, hook_url(hook["id"]), headers=tenant.w)
            assert gone.status_code == 404
            assert gone.json() == NOT_FOUND
        listed = await strict.get("/v1/webhooks", headers=tenant.r)
        assert [h["id"] for h in listed.json()["webhooks"]] == [kept["id"]]


class TestListDeliveries:
    async def test_none_yet(self, strict, tenant):
        hook = await create_webhook(strict, tenant, PUBLIC)
        assert (await strict.get(hook_url(hook["id"]) + "/deliveries")).status_code == 401
        response = await strict.get(hook_url(hook["id"]) + "/deliveries", headers=tenant.r)
        assert response.status_code == 200
        assert response.json() == {
            "deliveries": [],
            "pagination": {"page": 1, "limit": 20, "total": 0},
        }

    async def test_unknown_endpoint_is_not_found(self, strict, tenant):
        response = await strict.get(hook_url(str(uuid.uuid4())) + "/deliveries", headers=tenant.r)
        assert response.status_code == 404
        assert response.json() == NOT_FOUND


class TestReplayDelivery:
    async def test_needs_a_write_credential(self, strict, tenant):
        hook = await create_webhook(strict, tenant, PUBLIC)
        path = f"{hook_url(hook['id'])}/deliveries/{uuid.uuid4()}/replay"
        assert (await strict.post(path)).status_code == 401
        response = await strict.post(path, headers=tenant.r)
        assert response.status_code == 403
        assert response.json() == READ_ONLY

    async def test_unknown_delivery_is_not_found(self, strict, tenant, database):
        hook = await create_webhook(strict, tenant, PUBLIC)
        counts = await row_counts(database)
        path = f"{hook_url(hook['id'])}/deliveries/{uuid.uuid4()}/replay"
        response = await strict.post(path, headers=tenant.w)
        assert response.status_code == 404
        assert response.json() == {"message": "webhook delivery not found"}
        assert await row_counts(database) == counts
