"""The webhooks pages: endpoints added (the secret shown once), refused, disabled, enabled and
deleted; an endpoint's deliveries and their replay; the change feed a page at a time."""

import uuid

from sqlalchemy import select

from tessera.changes.schemas import EVENT_TYPES
from tessera.models import WebhookDelivery, WebhookEndpoint
from tests import orm
from tests.changes.feed import shown
from tests.console.test_users import table_rows
from tests.factories import create_user, create_users, row_counts

HOOK = "https://93.184.216.34/hook"


def hooks_path(tenant) -> str:
    return f"/console/projects/{tenant.project_id}/webhooks"


async def endpoints(database):
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(WebhookEndpoint)))


async def add(console, tenant, url=HOOK, event_types=()):
    """An endpoint added through the page: its row and the signing secret shown."""
    created = await console.post(hooks_path(tenant), {"url": url, "event_types": list(event_types)})
    assert created.status_code == 201, created.text
    secret = created.text.split("<dt>Signing secret</dt><dd><code>")[1].split("</code>")[0]
    return created, secret


async def a_delivery(database, endpoint_id, **overrides):
    async with orm.session(database) as session:
        row = WebhookDelivery(
            endpoint_id=endpoint_id,
            change_id=uuid.uuid4(),
            change_type="user.created",
            replay=False,
            status="failed",
            response_status=500,
            response_body="upstream down",
            error=None,
            duration_ms=42,
            **overrides,
        )
        session.add(row)
        await session.commit()
        return row


class TestEndpoints:
    async def test_adds_an_endpoint_and_shows_the_secret_once(
        self, operator, client, tenant, database
    ):
        created, secret = await add(operator, tenant, event_types=["user.created", "item.issued"])
        assert secret.startswith("whsec_")
        assert created.headers["content-security-policy"].startswith("default-src 'none'")
        [row] = await endpoints(database)
        assert (row.project_id, row.url, row.event_types, row.enabled) == (
            tenant.project_id,
            HOOK,
            ["item.issued", "user.created"],
            True,
        )
        api = (await client.get(f"/v1/webhooks/{row.id}", headers=tenant.r)).json()
        assert api["url"] == HOOK and api["status"] == "enabled"
        listed = await operator.get(hooks_path(tenant))
        assert listed.status_code == 200 and secret not in listed.text
        assert [HOOK, "item.issued, user.created", "enabled", "", "", f"{api['secret_hint']}…"] in [
            r[:6] for r in table_rows(listed.text)
        ]

    async def test_no_type_checked_is_every_type(self, owner, tenant, database):
        await add(owner, tenant)
        [row] = await endpoints(database)
        assert row.event_types is None
        listed = await owner.get(hooks_path(tenant))
        assert "every type" in listed.text
        for event_type in EVENT_TYPES:  # one checkbox each, with its label
            assert f'name="event_types" value="{event_type}"' in listed.text

    async def test_a_private_or_bad_url_is_a_400_page(self, operator, tenant, database):
        for url, why in (
            ("https://10.0.0.1/hook", "10.0.0.1"),
            ("https://127.0.0.1/hook", "127.0.0.1"),
            ("http://93.184.216.34/hook", "must be an https URL"),
        ):
            refused = await operator.post(hooks_path(tenant), {"url": url})
            assert refused.status_code == 400, url
            assert 'class="problem"' in refused.text and why in refused.text
        unknown = await operator.post(hooks_path(tenant), {"url": HOOK, "event_types": ["x.y"]})
        assert unknown.status_code == 400 and "event_types.0" in unknown.text
        assert await endpoints(database) == []

    async def test_disables_enables_and_deletes(self, operator, client, tenant, database):
        await add(operator, tenant)
        [row] = await endpoints(database)
        path = f"{hooks_path(tenant)}/{row.id}"
        disabled = await operator.post(f"{path}/disable")
        assert disabled.status_code == 303
        assert disabled.headers["location"].startswith(hooks_path(tenant) + "?notice=")
        api = (await client.get(f"/v1/webhooks/{row.id}", headers=tenant.r)).json()
        assert (api["status"], api["disabled_reason"]) == ("disabled", "disabled through the API")
        listed = await operator.get(hooks_path(tenant))
        assert f'action="{path}/enable"' in listed.text
        assert "disabled through the API" in listed.text
        enabled = await operator.post(f"{path}/enable")
        assert enabled.status_code == 303
        api = (await client.get(f"/v1/webhooks/{row.id}", headers=tenant.r)).json()
        assert (api["status"], api["disabled_reason"]) == ("enabled", None)
        deleted = await operator.post(f"{path}/delete")
        assert deleted.status_code == 303
        assert await endpoints(database) == []
        again = await operator.post(f"{path}/delete")
        assert again.status_code == 404 and "webhook endpoint not found" in again.text


class TestDeliveries:
    async def test_shows_a_delivery_and_replays_it(self, operator, tenant, database):
        await add(operator, tenant)
        [endpoint] = await endpoints(database)
        delivery = await a_delivery(database, endpoint.id)
        path = f"{hooks_path(tenant)}/{endpoint.id}"
        page = await operator.get(path)
        assert page.status_code == 200
        [row] = table_rows(page.text)[1:]
        assert row[1:6] == [
            f"user.created {delivery.change_id}",
            "failed",
            "500 upstream down",
            "",
            "42 ms",
        ]
        replayed = await operator.post(f"{path}/deliveries/{delivery.id}/replay")
        assert replayed.status_code == 303 and replayed.headers["location"].startswith(path)
        async with orm.session(database, write=False) as session:
            rows = list(
                await session.scalars(
                    select(WebhookDelivery).where(WebhookDelivery.id != delivery.id)
                )
            )
        [replay] = rows
        assert (replay.change_id, replay.status, replay.replay) == (
            delivery.change_id,
            "pending",
            True,
        )
        again = await operator.get(path)
        assert f"user.created {delivery.change_id} (replay)" in [
            r[1] for r in table_rows(again.text)
        ]

    async def test_an_unknown_endpoint_or_delivery_is_404(self, operator, tenant, database):
        missing = await operator.get(f"{hooks_path(tenant)}/{uuid.uuid4()}")
        assert missing.status_code == 404
        await add(operator, tenant)
        [endpoint] = await endpoints(database)
        replay = f"{hooks_path(tenant)}/{endpoint.id}/deliveries/{uuid.uuid4()}/replay"
        assert (await operator.post(replay)).status_code == 404


class TestChanges:
    async def test_shows_the_projects_changes_a_page_at_a_time(
        self, operator, client, tenant, other
    ):
        created = await create_users(client, tenant, 51)
        theirs = await create_user(client, other)
        assert len(await shown(client, tenant, 51)) == 51
        path = f"/console/projects/{tenant.project_id}/changes"
        first = await operator.get(path)
        assert first.status_code == 200
        rows = table_rows(first.text)[1:]
        assert len(rows) == 50 and all(row[0] == "user.created" for row in rows)
        assert [row[2] for row in rows] == [f"{u['email']} · {u['id']}" for u in created[:50]]
        assert theirs["email"] not in first.text
        cursor = first.text.split(f'href="{path}?after=')[1].split('"')[0]
        assert ">Next page</a>" in first.text
        second = await operator.get(f"{path}?after={cursor}")
        [last] = table_rows(second.text)[1:]
        assert last[2] == f"{created[50]['email']} · {created[50]['id']}"
        assert ">Next page</a>" not in second.text and "Newer changes" in second.text

    async def test_a_forged_cursor_is_a_400_page(self, operator, tenant):
        refused = await operator.get(f"/console/projects/{tenant.project_id}/changes?after=nope")
        assert refused.status_code == 400 and "not a cursor that Tessera gave" in refused.text


class TestScope:
    async def test_another_projects_owner_gets_404_on_every_page(
        self, owner, operator, tenant, other, database
    ):
        await add(operator, other)
        [endpoint] = await endpoints(database)
        delivery = await a_delivery(database, endpoint.id)
        theirs = hooks_path(other)
        for path in (
            theirs,
            f"{theirs}/{endpoint.id}",
            f"/console/projects/{other.project_id}/changes",
        ):
            assert (await owner.get(path)).status_code == 404, path
        before = await row_counts(database)
        for path, data in (
            (theirs, {"url": HOOK}),
            (f"{theirs}/{endpoint.id}/disable", {}),
            (f"{theirs}/{endpoint.id}/delete", {}),
            (f"{theirs}/{endpoint.id}/deliveries/{delivery.id}/replay", {}),
        ):
            assert (await owner.post(path, data)).status_code == 404, path
        # Their endpoint named under the owner's own project is not found either.
        mine = f"{hooks_path(tenant)}/{endpoint.id}"
        assert (await owner.get(mine)).status_code == 404
        assert (await owner.post(f"{mine}/delete")).status_code == 404
        assert await row_counts(database) == before
        [still] = await endpoints(database)
        assert still.enabled

    async def test_a_forged_csrf_token_changes_nothing(self, operator, tenant, database):
        await add(operator, tenant)
        [endpoint] = await endpoints(database)
        delivery = await a_delivery(database, endpoint.id)
        before = await row_counts(database)
        path = hooks_path(tenant)
        for target, data in (
            (path, {"url": HOOK}),
            (f"{path}/{endpoint.id}/disable", {}),
            (f"{path}/{endpoint.id}/delete", {}),
            (f"{path}/{endpoint.id}/deliveries/{delivery.id}/replay", {}),
        ):
            forged = await operator.http.post(target, data={"csrf": "forged", **data})
            assert forged.status_code == 403, target
        assert await row_counts(database) == before
        [still] = await endpoints(database)
        assert still.enabled
