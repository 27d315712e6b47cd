"""``require_activation`` (Mufi's rule, off unless a project asks): an inactive user cannot
receive items, be registered as an attendee or send a transfer; 409 naming the user and the
rule, and nothing is recorded."""

import pytest
from sqlalchemy import update

from tessera.models import Project
from tests import orm
from tests.factories import (
    create_event,
    create_order,
    create_product,
    create_user,
    issue_items,
    row_counts,
)


def _refusal(email: str, action: str) -> dict[str, str]:
    return {
        "message": f"user {email} is not activated: this project requires activation to {action}"
    }


async def _require_activation(app, database, tenant, on: bool = True) -> None:
    async with orm.session(database) as session:
        await session.execute(
            update(Project).where(Project.id == tenant.project_id).values(require_activation=on)
        )
        await session.commit()
    app.state.authenticator.cache.clear()  # as the cache's 2 s would, at once


async def _activate(client, tenant, user) -> None:
    response = await client.post("/v1/users/activate", headers=tenant.w, json={"id": user["id"]})
    assert response.status_code == 200, response.text


@pytest.fixture
async def strict(app, database, tenant):
    await _require_activation(app, database, tenant)
    return tenant


class TestRequireActivation:
    async def test_an_inactive_user_receives_nothing(self, client, database, strict):
        user = await create_user(client, strict)
        product = await create_product(client, strict)
        before = await row_counts(database)
        issued = await client.post(
            f"/v1/products/{product['id']}/items", headers=strict.w, json={"users": [user["id"]]}
        )
        assert (issued.status_code, issued.json()) == (
            409,
            _refusal(user["email"], "receive items"),
        )
        older = await client.post(
            "/v1/products/items/create",
            headers=strict.w,
            json={"product_id": product["id"], "users": [user["id"]]},
        )
        assert (older.status_code, older.json()) == (409, _refusal(user["email"], "receive items"))
        ordered = await create_order(client, strict, user["id"], (product["id"], 1))
        assert (ordered.status_code, ordered.json()) == (
            409,
            _refusal(user["email"], "receive items"),
        )
        assert await row_counts(database) == before

    async def test_a_pending_order_waits_and_completes_once_the_user_is_active(
        self, client, database, strict
    ):
        user = await create_user(client, strict)
        product = await create_product(client, strict)
        pending = await create_order(
            client, strict, user["id"], (product["id"], 1), status="pending"
        )
        assert pending.status_code == 201, pending.text
        order_id = pending.json()["id"]
        refused = await client.post(f"/v1/orders/{order_id}/complete", headers=strict.w)
        assert refused.status_code == 409
        await _activate(client, strict, user)
        completed = await client.post(f"/v1/orders/{order_id}/complete", headers=strict.w)
        assert completed.status_code == 200 and completed.json()["status"] == "completed"

    async def test_an_inactive_user_is_not_registered_as_an_attendee(
        self, client, database, strict
    ):
        user = await create_user(client, strict)
        event = await create_event(client, strict)
        before = await row_counts(database)
        response = await client.post(
            "/v1/events/attendees/register",
            headers=strict.w,
            json={"event_id": event["id"], "user_id": user["id"]},
        )
        assert (response.status_code, response.json()) == (
            409,
            _refusal(user["email"], "be registered as an attendee"),
        )
        assert await row_counts(database) == before
        await _activate(client, strict, user)
        registered = await client.post(
            "/v1/events/attendees/register",
            headers=strict.w,
            json={"event_id": event["id"], "user_id": user["id"]},
        )
        assert registered.status_code == 200, registered.text

    async def test_transfers_need_an_active_sender_and_recipient(
        self, app, client, database, tenant
    ):
        sender, recipient = await create_user(client, tenant), await create_user(client, tenant)
        product = await create_product(client, tenant, is_transferable=True)
        [item] = await issue_items(client, tenant, product["id"], sender["id"])  # rule still off
        await _require_activation(app, database, tenant)
        body = {
            "product_item_id": item["id"],
            "sender_user_id": sender["id"],
            "recipient_user_id": recipient["id"],
        }
        path = f"/v1/products/{product['id']}/transfer"
        before = await row_counts(database)
        refused = await client.post(path, headers=tenant.w, json=body)
        assert (refused.status_code, refused.json()) == (
            409,
            _refusal(sender["email"], "send a transfer"),
        )
        await _activate(client, tenant, sender)
        refused = await client.post(path, headers=tenant.w, json=body)
        assert (refused.status_code, refused.json()) == (
            409,
            _refusal(recipient["email"], "receive items"),
        )
        # Nothing but the sender's activation, and its change (user.activated).
        assert (await row_counts(database)) == before | {"changes": before["changes"] + 1}
        await _activate(client, tenant, recipient)
        moved = await client.post(path, headers=tenant.w, json=body)
        assert moved.status_code == 200, moved.text
        assert moved.json()["new_owner"]["id"] == recipient["id"]

    async def test_an_active_user_receives_and_the_rule_is_off_by_default(
        self, app, client, database, tenant
    ):
        product = await create_product(client, tenant)
        inactive = await create_user(client, tenant)
        assert len(await issue_items(client, tenant, product["id"], inactive["id"])) == 1
        await _require_activation(app, database, tenant)
        active = await create_user(client, tenant)
        await _activate(client, tenant, active)
        assert len(await issue_items(client, tenant, product["id"], active["id"])) == 1
        await _require_activation(app, database, tenant, on=False)
        assert len(await issue_items(client, tenant, product["id"], inactive["id"])) == 1

    async def test_another_projects_user_is_not_found(self, client, strict, other):
        theirs = await create_user(client, other)
        product = await create_product(client, strict)
        response = await client.post(
            f"/v1/products/{product['id']}/items", headers=strict.w, json={"users": [theirs["id"]]}
        )
        assert response.status_code == 404
