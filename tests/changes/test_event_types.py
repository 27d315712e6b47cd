"""Each type of change the API makes without a chain, with ``data`` as the API itself answers
for that object; a request that changes nothing, or is refused, writes no change."""

import uuid
from datetime import UTC, datetime
from typing import Any

from tests.changes.feed import marker, read_all, shown, typed
from tests.claims.conftest import claimable, from_address
from tests.factories import (
    Tenant,
    create_event,
    create_order,
    create_product,
    create_user,
    create_users,
    issue_items,
    row_counts,
    transfer_item,
    user_body,
)


async def items_shown(client, tenant: Tenant, product_id: str) -> list[dict[str, Any]]:
    """The product's items as GET /v1/products/{id}/items answers them, by item_id."""
    response = await client.get(f"/v1/products/{product_id}/items", headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def product_shown(client, tenant: Tenant, product_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/products/{product_id}", headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()


async def order_shown(client, tenant: Tenant, order_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/orders/{order_id}", headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()


async def profile(client, tenant: Tenant, user_id: str) -> dict[str, Any]:
    response = await client.post("/v1/users/profile", headers=tenant.r, json={"id": user_id})
    assert response.status_code == 200, response.text
    return response.json()


async def cursor_now(client, tenant: Tenant, count: int) -> str:
    """The cursor after the first ``count`` changes (once shown)."""
    events = await shown(client, tenant, count)
    assert len(events) == count, typed(events)
    _, cursor = await read_all(client, tenant)
    return cursor


async def register(client, tenant: Tenant, **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/events/attendees/register", headers=tenant.w, json=body)
    assert response.status_code == 200, response.text
    return response.json()


class TestShape:
    async def test_each_change_has_an_id_a_type_a_time_and_data(self, client, tenant):
        before = datetime.now(UTC)
        [user] = await create_users(client, tenant, 1)
        after = datetime.now(UTC)
        [event] = await shown(client, tenant, 1)
        assert set(event) == {"id", "type", "created_at", "data"}
        assert uuid.UUID(event["id"]) and event["id"] != user["id"]
        assert event["type"] == "user.created"
        assert before <= datetime.fromisoformat(event["created_at"]) <= after


class TestUsers:
    async def test_created_is_each_user_as_users_create_answers(self, client, tenant):
        response = await client.post(
            "/v1/users/create", headers=tenant.w, json=[user_body() for _ in range(3)]
        )
        assert response.status_code == 201
        users = response.json()["users"]
        assert [len(user["wallets"]) for user in users] == [1, 1, 1]
        events = await shown(client, tenant, 3)
        assert typed(events) == [("user.created", user) for user in users]
        assert len({event["id"] for event in events}) == 3

    async def test_a_refused_batch_writes_no_change(self, client, tenant, database):
        taken = await create_user(client, tenant)
        counts = await row_counts(database)
        response = await client.post(
            "/v1/users/create",
            headers=tenant.w,
            json=[user_body(), user_body(email=taken["email"])],
        )
        assert response.status_code == 409
        assert await row_counts(database) == counts
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 2)) == [("user.created", taken), last]

    async def test_a_replayed_request_writes_its_changes_once(self, client, tenant):
        headers = tenant.w | {"Idempotency-Key": "create-once"}
        body = [user_body(), user_body()]
        first = await client.post("/v1/users/create", headers=headers, json=body)
        again = await client.post("/v1/users/create", headers=headers, json=body)
        assert first.status_code == again.status_code == 201
        assert again.headers["idempotent-replayed"] == "true"
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 3)) == [
            *(("user.created", user) for user in first.json()["users"]),
            last,
        ]

    async def test_activated_is_the_user_as_users_profile_answers(self, client, tenant):
        user = await create_user(client, tenant)
        after = await cursor_now(client, tenant, 1)
        body = {"id": user["id"]}
        response = await client.post("/v1/users/activate", headers=tenant.w, json=body)
        assert response.status_code == 200 and response.json()["isActivated"] is True
        activated = await profile(client, tenant, user["id"])
        assert activated["isActivated"] is True
        again = await client.post("/v1/users/activate", headers=tenant.w, json=body)
        assert again.status_code == 200  # already active: nothing changes
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 2, after=after)) == [
            ("user.activated", activated),
            last,
        ]


class TestAttendees:
    async def test_registered_then_checked_in_as_the_register_call_answers(self, client, tenant):
        event = await create_event(client, tenant)
        user = await create_user(client, tenant)
        after = await cursor_now(client, tenant, 1)  # events are not changes: only the user
        body = {"event_id": event["id"], "user_id": user["id"]}
        registered = await register(client, tenant, **body)
        again = await register(client, tenant, **body)  # nothing to change
        checked_in = await register(client, tenant, **body, checked_in_at=1_800_000_000)
        same = await register(client, tenant, **body, checked_in_at=1_800_000_000)
        moved = await register(client, tenant, **body, checked_in_at=1_800_000_100)
        assert again == registered and same == checked_in
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 4, after=after)) == [
            ("attendee.registered", registered),
            ("attendee.checked_in", checked_in),
            ("attendee.checked_in", moved),
            last,
        ]

    async def test_registered_and_checked_in_at_once(self, client, tenant):
        event = await create_event(client, tenant)
        user = await create_user(client, tenant)
        after = await cursor_now(client, tenant, 1)
        attendee = await register(
            client, tenant, event_id=event["id"], email=user["email"], checked_in_at=1_800_000_000
        )
        new_date = await register(
            client, tenant, event_id=event["id"], email=user["email"], registered_at=1_700_000_000
        )
        assert new_date["registered_at"] == 1_700_000_000
        assert typed(await shown(client, tenant, 3, after=after)) == [
            ("attendee.registered", attendee),
            ("attendee.checked_in", attendee),
            ("attendee.registered", new_date),
        ]


class TestProducts:
    async def test_created_and_updated_as_get_answers(self, client, tenant):
        event = await create_event(client, tenant)
        created = await create_product(client, tenant, event_id=event["id"], stock=10)
        assert created == await product_shown(client, tenant, created["id"])
        path = f"/v1/products/{created['id']}"
        response = await client.patch(path, headers=tenant.w, json={"name": "Renamed", "stock": 5})
        assert response.status_code == 200
        updated = response.json()
        assert updated == await product_shown(client, tenant, created["id"])
        assert (updated["name"], updated["stock"]) == ("Renamed", 5)
        assert typed(await shown(client, tenant, 2)) == [
            ("product.created", created),
            ("product.updated", updated),
        ]

    async def test_a_patch_that_changes_nothing_writes_no_change(self, client, tenant):
        product = await create_product(client, tenant, stock=10)
        path = f"/v1/products/{product['id']}"
        for body in ({}, {"name": product["name"], "stock": 10}):
            response = await client.patch(path, headers=tenant.w, json=body)
            assert response.status_code == 200 and response.json() == product
        refused = await client.patch(path, headers=tenant.w, json={"redemption_quantity": 0})
        assert refused.status_code == 400
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 2)) == [("product.created", product), last]


class TestItems:
    async def test_issued_one_change_per_item_as_the_items_endpoints_answer(self, client, tenant):
        users = await create_users(client, tenant, 3)
        product = await create_product(client, tenant)
        after = await cursor_now(client, tenant, 4)
        items = await issue_items(client, tenant, product["id"], *(u["id"] for u in users))
        assert [item["user"]["id"] for item in items] == [u["id"] for u in users]
        assert items == await items_shown(client, tenant, product["id"])
        assert typed(await shown(client, tenant, 3, after=after)) == [
            ("item.issued", item) for item in items
        ]

    async def test_an_out_of_stock_issue_writes_no_change(self, client, tenant, database):
        ada, bob = await create_users(client, tenant, 2)
        product = await create_product(client, tenant, stock=1)
        after = await cursor_now(client, tenant, 3)
        counts = await row_counts(database)
        response = await client.post(
            f"/v1/products/{product['id']}/items",
            headers=tenant.w,
            json={"users": [ada["id"], bob["id"]]},
        )
        assert response.status_code == 409
        assert response.json() == {"message": "product is out of stock: 1 left, 2 requested"}
        assert await row_counts(database) == counts
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 1, after=after)) == [last]

    async def test_redeemed_as_redeem_answers_and_once_per_nonce(self, client, tenant):
        user = await create_user(client, tenant)
        product = await create_product(client, tenant, redemption_quantity=3)
        [item] = await issue_items(client, tenant, product["id"], user["id"])
        after = await cursor_now(client, tenant, 3)
        path = f"/v1/products/{product['id']}/items/redeem"
        body = {"product_item_id": item["id"], "nonce": "gate-1"}
        first = await client.post(path, headers=tenant.w, json=body)
        repeat = await client.post(path, headers=tenant.w, json=body)
        assert first.status_code == repeat.status_code == 200
        assert repeat.json() == first.json() and first.json()["redemption_count"] == 1
        second = await client.post(path, headers=tenant.w, json={"product_item_id": item["id"]})
        assert second.status_code == 200 and second.json()["redemption_count"] == 2
        assert [second.json()] == await items_shown(client, tenant, product["id"])
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 3, after=after)) == [
            ("item.redeemed", first.json()),
            ("item.redeemed", second.json()),
            last,
        ]

    async def test_a_refused_redemption_writes_no_change(self, client, tenant):
        user = await create_user(client, tenant)
        product = await create_product(client, tenant)
        [item] = await issue_items(client, tenant, product["id"], user["id"])
        path = f"/v1/products/{product['id']}/items/redeem"
        assert (
            await client.post(path, headers=tenant.w, json={"product_item_id": item["id"]})
        ).status_code == 200
        after = await cursor_now(client, tenant, 4)
        refused = await client.post(path, headers=tenant.w, json={"product_item_id": item["id"]})
        assert refused.status_code == 409
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 1, after=after)) == [last]

    async def test_transferred_as_transfer_answers(self, client, tenant):
        ada, bob = await create_users(client, tenant, 2)
        product = await create_product(client, tenant, is_transferable=True)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        after = await cursor_now(client, tenant, 4)
        response = await transfer_item(client, tenant, product["id"], item["id"], ada, bob)
        assert response.status_code == 200
        moved = response.json()
        assert (moved["previous_owner"]["id"], moved["new_owner"]["id"]) == (ada["id"], bob["id"])
        refused = await transfer_item(client, tenant, product["id"], item["id"], ada, bob)
        assert refused.status_code == 409  # Ada no longer owns it
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 2, after=after)) == [
            ("item.transferred", moved),
            last,
        ]


class TestOrders:
    async def test_a_completed_order_is_created_then_completed_with_its_items(self, client, tenant):
        user = await create_user(client, tenant)
        product = await create_product(client, tenant)
        after = await cursor_now(client, tenant, 2)
        response = await create_order(client, tenant, user["id"], (product["id"], 2))
        assert response.status_code == 201
        order = response.json()
        assert order["status"] == "completed"
        assert order == await order_shown(client, tenant, order["id"])
        items = await items_shown(client, tenant, product["id"])
        assert len(items) == 2
        events = typed(await shown(client, tenant, 4, after=after))
        assert [event for event in events if event[0].startswith("order.")] == [
            ("order.created", order),
            ("order.completed", order),
        ]
        assert [event for event in events if event[0] == "item.issued"] == [
            ("item.issued", item) for item in items
        ]
        assert len(events) == 4

    async def test_a_pending_order_created_then_completed(self, client, tenant):
        user = await create_user(client, tenant)
        product = await create_product(client, tenant)
        after = await cursor_now(client, tenant, 2)
        response = await create_order(
            client, tenant, user["id"], (product["id"], 1), status="pending"
        )
        assert response.status_code == 201
        pending = response.json()
        assert pending == await order_shown(client, tenant, pending["id"])
        done = await client.post(f"/v1/orders/{pending['id']}/complete", headers=tenant.w)
        assert done.status_code == 200
        completed = done.json()
        assert completed["status"] == "completed"
        assert completed == await order_shown(client, tenant, pending["id"])
        again = await client.post(f"/v1/orders/{pending['id']}/complete", headers=tenant.w)
        assert again.status_code == 409
        [item] = await items_shown(client, tenant, product["id"])
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 4, after=after)) == [
            ("order.created", pending),
            ("item.issued", item),
            ("order.completed", completed),
            last,
        ]

    async def test_cancelled_as_cancel_answers(self, client, tenant):
        user = await create_user(client, tenant)
        product = await create_product(client, tenant)
        response = await create_order(
            client, tenant, user["id"], (product["id"], 1), status="pending"
        )
        pending = response.json()
        after = await cursor_now(client, tenant, 3)
        cancel = await client.post(f"/v1/orders/{pending['id']}/cancel", headers=tenant.w)
        assert cancel.status_code == 200
        cancelled = cancel.json()
        assert cancelled["status"] == "cancelled"
        assert cancelled == await order_shown(client, tenant, pending["id"])
        assert (
            await client.post(f"/v1/orders/{pending['id']}/cancel", headers=tenant.w)
        ).status_code == 409
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 2, after=after)) == [
            ("order.cancelled", cancelled),
            last,
        ]

    async def test_an_out_of_stock_order_writes_no_change(self, client, tenant, database):
        user = await create_user(client, tenant)
        product = await create_product(client, tenant, stock=1)
        after = await cursor_now(client, tenant, 2)
        counts = await row_counts(database)
        response = await create_order(client, tenant, user["id"], (product["id"], 2))
        assert response.status_code == 409
        assert await row_counts(database) == counts
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 1, after=after)) == [last]


def without_ticket(claimed: dict[str, Any]) -> dict[str, Any]:
    """A claim's answer as its change shows it: the tickets' URLs, credentials for their
    pages, stay out of the feed and webhooks."""
    assert claimed["ticket_url"] is not None and claimed["ticket_urls"]
    return {k: v for k, v in claimed.items() if k not in {"ticket_url", "ticket_urls"}}


class TestClaims:
    async def test_claimed_with_the_new_user_and_the_item(self, app, client, tenant):
        product, link = await claimable(client, tenant)
        after = await cursor_now(client, tenant, 1)
        async with from_address(app, "198.51.100.71") as public:
            response = await public.post(
                f"/v1/claims/{link['token']}", json={"email": "claimer@example.com"}
            )
            assert response.status_code == 201
            claimed = response.json()
            again = await public.post(
                f"/v1/claims/{link['token']}", json={"email": "claimer@example.com"}
            )
            assert again.status_code == 200  # the first item back: nothing new
        user = await profile(client, tenant, claimed["user_id"])
        [item] = await items_shown(client, tenant, product["id"])
        assert item["id"] == claimed["product_item"]["id"]
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 4, after=after)) == [
            ("user.created", user),
            ("item.issued", item),
            ("claim.claimed", without_ticket(claimed) | {"claim_link_id": link["id"]}),
            last,
        ]

    async def test_a_known_user_claims_and_a_refused_claim_writes_no_change(
        self, app, client, tenant, database
    ):
        known = await create_user(client, tenant)
        product, link = await claimable(client, tenant, link={"email": known["email"]})
        after = await cursor_now(client, tenant, 2)
        async with from_address(app, "198.51.100.72") as public:
            counts = await row_counts(database)
            refused = await public.post(
                f"/v1/claims/{link['token']}", json={"email": "someone@example.com"}
            )
            assert refused.status_code == 403
            assert await row_counts(database) == counts
            response = await public.post(
                f"/v1/claims/{link['token']}", json={"email": known["email"]}
            )
            assert response.status_code == 201
        claimed = response.json()
        assert claimed["user_id"] == known["id"]
        [item] = await items_shown(client, tenant, product["id"])
        assert typed(await shown(client, tenant, 2, after=after)) == [
            ("item.issued", item),
            ("claim.claimed", without_ticket(claimed) | {"claim_link_id": link["id"]}),
        ]
