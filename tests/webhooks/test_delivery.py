"""Delivery to a real receiver: signed per Standard Webhooks, in feed order, at least once;
retried while the receiver fails, disabled when it fails too long, replayed on request; never
to a refused address, never through a redirect; one dispatcher per endpoint at a time."""

import asyncio
import time
from datetime import timedelta

import pytest
from sqlalchemy import text
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests import orm
from tests.conftest import BACKEND
from tests.factories import create_product, create_user, create_users, issue_items, row_counts
from tests.webhooks.conftest import (
    changes,
    create_webhook,
    deliver_until,
    deliveries,
    read_webhook,
)

DELIVERY_KEYS = {
    "id",
    "event_id",
    "event_type",
    "replay",
    "status",
    "response_status",
    "response_body",
    "error",
    "duration_ms",
    "created_at",
}


def ids(events: list[dict]) -> list[str]:
    return [event["id"] for event in events]


async def some_changes(client, tenant) -> list[dict]:
    """Two users, a product, an item for each user: five changes in four transactions."""
    users = await create_users(client, tenant, 2)
    product = await create_product(client, tenant)
    await issue_items(client, tenant, product["id"], *(user["id"] for user in users))
    return await changes(client, tenant, 5)


class TestDelivery:
    async def test_each_change_once_in_order_signed(self, client, tenant, receiver, dispatcher):
        hook = await create_webhook(client, tenant, receiver.url)
        events = await some_changes(client, tenant)
        assert [event["type"] for event in events] == [
            "user.created",
            "user.created",
            "product.created",
            "item.issued",
            "item.issued",
        ]
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= len(events))
        assert await dispatcher.deliver_due() == 0

        assert receiver.ids == ids(events)
        for request, event in zip(receiver.requests, events, strict=True):
            assert request.method == "POST"
            assert request.path == "/hook"
            assert request.headers["content-type"] == "application/json"
            assert request.headers["user-agent"].startswith("Tessera-Webhooks/")
            assert request.headers["webhook-id"] == event["id"]
            assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 60
            assert request.headers["webhook-signature"].startswith("v1,")
            assert Webhook(hook["secret"]).verify(request.body, request.headers) == event
            assert request.json() == event

    async def test_the_signature_is_the_endpoints_own(self, client, tenant, receiver, dispatcher):
        hook = await create_webhook(client, tenant, receiver.url)
        other_hook = await create_webhook(client, tenant, receiver.url + "/other")
        await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 2)
        [mine] = [request for request in receiver.requests if request.path == "/hook"]
        Webhook(hook["secret"]).verify(mine.body, mine.headers)
        with pytest.raises(WebhookVerificationError):
            Webhook(other_hook["secret"]).verify(mine.body, mine.headers)
        tampered = mine.body.replace(b"user.created", b"user.activated")
        with pytest.raises(WebhookVerificationError):
            Webhook(hook["secret"]).verify(tampered, mine.headers)

    async def test_deliveries_list_each_attempt_newest_first(
        self, client, tenant, receiver, dispatcher
    ):
        hook = await create_webhook(client, tenant, receiver.url)
        events = await some_changes(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= len(events))

        listed = await deliveries(client, tenant, hook["id"])
        assert [d["event_id"] for d in listed] == ids(events)[::-1]
        assert [d["event_type"] for d in listed] == [e["type"] for e in events][::-1]
        for delivery in listed:
            assert set(delivery) == DELIVERY_KEYS
            assert delivery["status"] == "succeeded"
            assert delivery["response_status"] == 200
            assert delivery["response_body"] == '{"ok": true}'
            assert delivery["error"] is None
            assert delivery["replay"] is False
            assert delivery["duration_ms"] >= 0

        page = await client.get(
            f"/v1/webhooks/{hook['id']}/deliveries",
            headers=tenant.r,
            params={"limit": 2, "page": 2},
        )
        assert page.json() == {
            "deliveries": listed[2:4],
            "pagination": {"page": 2, "limit": 2, "total": 5},
        }
        assert (await read_webhook(client, tenant, hook["id"]))["status"] == "enabled"

    async def test_only_the_event_types_asked_for(self, client, tenant, receiver, dispatcher):
        types = ["product.created", "item.issued"]
        await create_webhook(client, tenant, receiver.url + "/some", event_types=types)
        await create_webhook(client, tenant, receiver.url + "/all")
        events = await some_changes(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= len(events) + 3)
        assert await dispatcher.deliver_due() == 0

        some = [r for r in receiver.requests if r.path == "/hook/some"]
        every = [r for r in receiver.requests if r.path == "/hook/all"]
        assert [r.json() for r in some] == [e for e in events if e["type"] in types]
        assert [r.json() for r in every] == events

    async def test_a_new_endpoint_gets_only_later_changes(
        self, client, tenant, receiver, dispatcher
    ):
        await create_user(client, tenant)
        hook = await create_webhook(client, tenant, receiver.url)
        later = await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 1)
        assert await dispatcher.deliver_due() == 0
        [request] = receiver.requests
        assert request.json()["data"] == later
        [_, after] = await changes(client, tenant, 2)
        assert receiver.ids == [after["id"]]
        assert [d["event_id"] for d in await deliveries(client, tenant, hook["id"])] == [
            after["id"]
        ]

    async def test_another_projects_changes_are_not_sent(
        self, client, tenant, other, receiver, dispatcher
    ):
        await create_webhook(client, tenant, receiver.url)
        await create_user(client, other)
        mine = await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 1)
        assert await dispatcher.deliver_due() == 0
        assert [r.json()["data"] for r in receiver.requests] == [mine]

    async def test_a_deleted_endpoint_gets_nothing(self, client, tenant, receiver, dispatcher):
        hook = await create_webhook(client, tenant, receiver.url)
        await create_user(client, tenant)
        await changes(client, tenant, 1)  # in the feed, waiting for the endpoint
        response = await client.delete(f"/v1/webhooks/{hook['id']}", headers=tenant.w)
        assert response.status_code == 204
        assert await dispatcher.deliver_due() == 0
        assert receiver.requests == []

    async def test_deleting_an_endpoint_deletes_its_deliveries(
        self, client, tenant, receiver, dispatcher, database
    ):
        kept = await create_webhook(client, tenant, receiver.url + "/kept")
        hook = await create_webhook(client, tenant, receiver.url)
        await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 2)
        assert (await row_counts(database))["webhook_deliveries"] == 2
        response = await client.delete(f"/v1/webhooks/{hook['id']}", headers=tenant.w)
        assert response.status_code == 204
        assert (await row_counts(database))["webhook_deliveries"] == 1
        assert len(await deliveries(client, tenant, kept["id"])) == 1
        gone = await client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=tenant.r)
        assert gone.status_code == 404

    @pytest.mark.skipif(BACKEND != "postgresql", reason="PostgreSQL's transaction ids")
    async def test_a_change_committed_before_the_endpoint_while_an_older_transaction_runs(
        self, client, tenant, receiver, dispatcher, database
    ):
        # On PostgreSQL a new endpoint starts below the oldest transaction still running:
        # a change committed before the endpoint, by a transaction younger than that one,
        # must not reach it either ("it receives the changes committed from now on").
        async with orm.session(database) as older:
            await older.execute(text("SELECT pg_current_xact_id()"))
            await create_user(client, tenant)
            hook = await create_webhook(client, tenant, receiver.url)
        later = await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 1)
        await dispatcher.deliver_due()
        [_, after] = await changes(client, tenant, 2)
        assert after["data"] == later
        assert receiver.ids == [after["id"]]
        assert [d["event_id"] for d in await deliveries(client, tenant, hook["id"])] == [
            after["id"]
        ]


class TestReceiverDown:
    async def test_retried_in_order_until_accepted(self, client, tenant, receiver, dispatcher):
        hook = await create_webhook(client, tenant, receiver.url)
        await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 1)

        receiver.status = 500
        await create_user(client, tenant)
        await create_user(client, tenant)
        [first, failing, waiting] = await changes(client, tenant, 3)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 4)
        assert receiver.ids[0] == first["id"]
        assert set(receiver.ids[1:]) == {failing["id"]}  # nothing after it while it fails

        state = await read_webhook(client, tenant, hook["id"])
        assert state["status"] == "failing"
        assert state["failing_since"] is not None
        assert state["next_attempt_at"] is not None
        assert state["disabled_reason"] is None
        failed = (await deliveries(client, tenant, hook["id"]))[:-1]
        assert len(failed) == len(receiver.requests) - 1
        for delivery in failed:
            assert delivery["event_id"] == failing["id"]
            assert delivery["status"] == "failed"
            assert delivery["response_status"] == 500
            assert delivery["response_body"] == "not now"
            assert delivery["error"] == "the receiver answered 500"

        receiver.stop()  # connections refused
        tried = len(failed)

        async def refused_once() -> bool:
            return len(await deliveries(client, tenant, hook["id"])) - 1 > tried

        await deliver_until(dispatcher, refused_once)
        refused = (await deliveries(client, tenant, hook["id"]))[0]
        assert refused["event_id"] == failing["id"]
        assert refused["status"] == "failed"
        assert refused["response_status"] is None
        assert refused["error"].startswith("ConnectError: ")
        still = await read_webhook(client, tenant, hook["id"])
        assert still["status"] == "failing"
        assert still["failing_since"] == state["failing_since"]

        receiver.start()
        receiver.status = 200
        accepted = len(receiver.requests)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= accepted + 2)
        assert await dispatcher.deliver_due() == 0
        assert receiver.ids[accepted:] == [failing["id"], waiting["id"]]
        # No change lost, none out of order: the distinct ids in arrival order are the feed.
        assert list(dict.fromkeys(receiver.ids)) == [first["id"], failing["id"], waiting["id"]]
        for request in receiver.requests:
            Webhook(hook["secret"]).verify(request.body, request.headers)
        back = await read_webhook(client, tenant, hook["id"])
        assert back["status"] == "enabled"
        assert back["failing_since"] is None
        assert back["next_attempt_at"] is None
        latest = await deliveries(client, tenant, hook["id"], limit=2)
        assert [(d["event_id"], d["status"]) for d in latest] == [
            (waiting["id"], "succeeded"),
            (failing["id"], "succeeded"),
        ]

    async def test_disabled_after_failing_too_long(self, client, tenant, receiver, make_dispatcher):
        dispatcher = make_dispatcher(disable_after=timedelta(seconds=0.2))
        hook = await create_webhook(client, tenant, receiver.url)
        receiver.status = 500
        await create_user(client, tenant)
        await create_user(client, tenant)
        [first, second] = await changes(client, tenant, 2)

        async def disabled() -> bool:
            return (await read_webhook(client, tenant, hook["id"]))["status"] == "disabled"

        await deliver_until(dispatcher, disabled)
        state = await read_webhook(client, tenant, hook["id"])
        assert state["disabled_reason"].startswith("failing since ")
        assert state["disabled_reason"].endswith(": the receiver answered 500")
        assert state["failing_since"] is not None
        assert state["next_attempt_at"] is None
        assert set(receiver.ids) == {first["id"]}

        sent = len(receiver.requests)
        for _ in range(3):
            await asyncio.sleep(0.07)  # past the retry delay: a disabled endpoint still waits
            assert await dispatcher.deliver_due() == 0
        assert len(receiver.requests) == sent

        receiver.status = 200
        response = await client.patch(
            f"/v1/webhooks/{hook['id']}", headers=tenant.w, json={"enabled": True}
        )
        assert response.status_code == 200
        resumed = response.json()
        assert resumed["status"] == "enabled"
        assert resumed["disabled_reason"] is None
        assert resumed["failing_since"] is None
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= sent + 2)
        assert await dispatcher.deliver_due() == 0
        assert receiver.ids[sent:] == [first["id"], second["id"]]

    async def test_disabled_through_the_api_changes_wait(
        self, client, tenant, receiver, dispatcher
    ):
        hook = await create_webhook(client, tenant, receiver.url)
        path = f"/v1/webhooks/{hook['id']}"
        assert (await client.patch(path, headers=tenant.w, json={"enabled": False})).is_success
        await create_user(client, tenant)
        await create_user(client, tenant)
        events = await changes(client, tenant, 2)
        assert await dispatcher.deliver_due() == 0
        assert receiver.requests == []

        assert (await client.patch(path, headers=tenant.w, json={"enabled": True})).is_success
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 2)
        assert receiver.ids == ids(events)

    async def test_a_corrected_url_gets_the_waiting_changes(
        self, client, tenant, receiver, dispatcher
    ):
        hook = await create_webhook(client, tenant, "http://127.0.0.1:9/hook")  # nothing there
        await create_user(client, tenant)
        [event] = await changes(client, tenant, 1)

        async def failing() -> bool:
            return (await read_webhook(client, tenant, hook["id"]))["status"] == "failing"

        await deliver_until(dispatcher, failing)
        [attempt] = await deliveries(client, tenant, hook["id"])
        assert attempt["error"].startswith("ConnectError: ")

        response = await client.patch(
            f"/v1/webhooks/{hook['id']}", headers=tenant.w, json={"url": receiver.url}
        )
        assert response.status_code == 200
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 1)
        assert receiver.ids == [event["id"]]
        Webhook(hook["secret"]).verify(receiver.requests[0].body, receiver.requests[0].headers)
        assert (await read_webhook(client, tenant, hook["id"]))["status"] == "enabled"


class TestReplay:
    async def test_the_same_event_again_freshly_signed(self, client, tenant, receiver, dispatcher):
        hook = await create_webhook(client, tenant, receiver.url)
        await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 1)
        [event] = await changes(client, tenant, 1)
        [delivered] = await deliveries(client, tenant, hook["id"])

        path = f"/v1/webhooks/{hook['id']}/deliveries/{delivered['id']}/replay"
        response = await client.post(path, headers=tenant.w)
        assert response.status_code == 202
        replay = response.json()
        assert replay == {
            "id": replay["id"],
            "event_id": event["id"],
            "event_type": "user.created",
            "replay": True,
            "status": "pending",
            "response_status": None,
            "response_body": None,
            "error": None,
            "duration_ms": None,
            "created_at": replay["created_at"],
        }
        assert replay["id"] != delivered["id"]
        assert (await deliveries(client, tenant, hook["id"]))[0] == replay

        assert await dispatcher.deliver_due() == 1
        [first, again] = receiver.requests
        assert again.id == first.id == event["id"]
        assert again.body == first.body
        assert Webhook(hook["secret"]).verify(again.body, again.headers) == event
        [settled, original] = await deliveries(client, tenant, hook["id"])
        assert settled == replay | {
            "status": "succeeded",
            "response_status": 200,
            "response_body": '{"ok": true}',
            "duration_ms": settled["duration_ms"],
        }
        assert original == delivered
        assert await dispatcher.deliver_due() == 0

    async def test_a_replay_is_sent_to_a_disabled_endpoint_too(
        self, client, tenant, receiver, dispatcher
    ):
        hook = await create_webhook(client, tenant, receiver.url)
        await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 1)
        [delivered] = await deliveries(client, tenant, hook["id"])
        path = f"/v1/webhooks/{hook['id']}"
        assert (await client.patch(path, headers=tenant.w, json={"enabled": False})).is_success
        replayed = await client.post(
            f"{path}/deliveries/{delivered['id']}/replay", headers=tenant.w
        )
        assert replayed.status_code == 202
        assert await dispatcher.deliver_due() == 1
        assert receiver.ids == [delivered["event_id"]] * 2

    async def test_a_failed_replay_is_recorded(self, client, tenant, receiver, dispatcher):
        hook = await create_webhook(client, tenant, receiver.url)
        await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 1)
        [delivered] = await deliveries(client, tenant, hook["id"])
        receiver.status = 503
        path = f"/v1/webhooks/{hook['id']}/deliveries/{delivered['id']}/replay"
        assert (await client.post(path, headers=tenant.w)).status_code == 202
        assert await dispatcher.deliver_due() == 1
        settled = (await deliveries(client, tenant, hook["id"]))[0]
        assert settled["replay"] is True
        assert settled["status"] == "failed"
        assert settled["response_status"] == 503
        assert settled["error"] == "the receiver answered 503"
        # A replay is outside the feed's order: the endpoint itself is not failing.
        assert (await read_webhook(client, tenant, hook["id"]))["status"] == "enabled"

    async def test_another_endpoints_delivery_is_not_found(
        self, client, tenant, other, receiver, dispatcher, database
    ):
        theirs = await create_webhook(client, other, receiver.url)
        mine = await create_webhook(client, tenant, receiver.url)
        await create_user(client, other)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 1)
        [delivered] = await deliveries(client, other, theirs["id"])
        for endpoint, message in [
            (mine["id"], "webhook delivery not found"),
            (theirs["id"], "webhook endpoint not found"),
        ]:
            response = await client.post(
                f"/v1/webhooks/{endpoint}/deliveries/{delivered['id']}/replay", headers=tenant.w
            )
            assert response.status_code == 404
            assert response.json() == {"message": message}
        assert await deliveries(client, other, theirs["id"]) == [delivered]
        assert await dispatcher.deliver_due() == 0
        assert len(receiver.requests) == 1


class TestRefusedAtDelivery:
    @pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
    async def test_a_private_address_is_not_dialled(
        self, client, tenant, receiver, make_dispatcher, host
    ):
        # Registered while private addresses were allowed (or a name that resolved elsewhere
        # then): the dispatcher checks the address again, and connects to nothing.
        url = receiver.url.replace("127.0.0.1", host)
        hook = await create_webhook(client, tenant, url)
        await create_user(client, tenant)
        guarded = make_dispatcher(allow_private=False)

        async def attempted() -> bool:
            return bool(await deliveries(client, tenant, hook["id"]))

        await deliver_until(guarded, attempted)
        assert receiver.requests == []
        [attempt] = await deliveries(client, tenant, hook["id"])
        assert attempt["status"] == "failed"
        assert attempt["response_status"] is None
        assert attempt["error"] == (
            f"UnsafeAddress: {host} resolves to an address webhooks may not reach: 127.0.0.1"
        )
        assert (await read_webhook(client, tenant, hook["id"]))["status"] == "failing"

        # The same endpoint, where private addresses are allowed: it was only the guard.
        await deliver_until(make_dispatcher(), lambda: len(receiver.requests) >= 1)
        [event] = await changes(client, tenant, 1)
        assert receiver.ids == [event["id"]]

    async def test_a_redirect_is_not_followed(self, client, tenant, receiver, dispatcher):
        hook = await create_webhook(client, tenant, receiver.url)
        receiver.status = 302
        await create_user(client, tenant)
        await deliver_until(dispatcher, lambda: len(receiver.requests) >= 2)
        assert {(r.method, r.path) for r in receiver.requests} == {("POST", "/hook")}
        attempt = (await deliveries(client, tenant, hook["id"]))[-1]
        assert attempt["status"] == "failed"
        assert attempt["response_status"] == 302
        assert attempt["error"] == "the receiver answered 302"
        assert (await read_webhook(client, tenant, hook["id"]))["status"] == "failing"


class TestRacingDispatchers:
    async def test_each_event_once_in_order(self, client, tenant, receiver, make_dispatcher):
        hooks = [await create_webhook(client, tenant, f"{receiver.url}/{n}") for n in range(3)]
        await create_users(client, tenant, 3)
        for _ in range(3):
            await create_user(client, tenant)
        events = await changes(client, tenant, 6)
        racing = [make_dispatcher() for _ in range(2)]
        expected = len(events) * len(hooks)

        deadline = time.monotonic() + 10
        while len(receiver.requests) < expected:
            assert time.monotonic() < deadline, "not delivered in 10 s"
            await asyncio.gather(*(dispatcher.deliver_due() for dispatcher in racing))
        for _ in range(3):
            sent = await asyncio.gather(*(dispatcher.deliver_due() for dispatcher in racing))
            assert sent == [0, 0]

        for n, hook in enumerate(hooks):
            got = [r for r in receiver.requests if r.path == f"/hook/{n}"]
            assert [r.id for r in got] == ids(events)
            listed = await deliveries(client, tenant, hook["id"])
            assert [d["event_id"] for d in listed] == ids(events)[::-1]
            assert {d["status"] for d in listed} == {"succeeded"}

    async def test_while_changes_keep_coming(self, client, tenant, receiver, make_dispatcher):
        await create_webhook(client, tenant, receiver.url)
        racing = [make_dispatcher() for _ in range(2)]
        for _ in range(4):
            await asyncio.gather(
                create_user(client, tenant),
                *(dispatcher.deliver_due() for dispatcher in racing),
            )
        events = await changes(client, tenant, 4)
        await deliver_until(racing[0], lambda: len(receiver.requests) >= len(events))
        await asyncio.gather(*(dispatcher.deliver_due() for dispatcher in racing))
        assert receiver.ids == ids(events)
