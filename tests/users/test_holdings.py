"""POST /v1/users/items: the items a user owns now, across the project's products."""

import uuid
from datetime import datetime

import pytest

from tests.factories import create_product, create_users, issue_items, transfer_item
from tests.products.test_items import owner

PATH = "/v1/users/items"


class TestUserItems:
    async def test_needs_a_credential(self, client, tenant):
        [user] = await create_users(client, tenant, 1)
        response = await client.post(PATH, json={"id": user["id"]})
        assert response.status_code == 401

    async def test_another_projects_user_is_404(self, client, tenant, other):
        [theirs] = await create_users(client, other, 1)
        product = await create_product(client, other)
        await issue_items(client, other, product["id"], theirs["id"])
        for ref in (
            {"id": theirs["id"]},
            {"email": theirs["email"]},
            {"referenceId": theirs["referenceId"]},
            {"id": str(uuid.uuid4())},
        ):
            response = await client.post(PATH, headers=tenant.r, json=ref)
            assert (response.status_code, response.json()) == (404, {"message": "user not found"})

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({"page": 0}, "page: Input should be greater than or equal to 1"),
            ({"page": 1_000_001}, "page: Input should be less than or equal to 1000000"),
            ({"limit": 0}, "limit: Input should be greater than or equal to 1"),
            ({"limit": 101}, "limit: Input should be less than or equal to 100"),
            ({"limit": "10"}, "limit: Input should be a valid integer"),
            ({"page": 1.5}, "page: Input should be a valid integer"),
            ({"page": True}, "page: Input should be a valid integer"),
            ({"offset": 0}, "offset: unknown field"),
        ],
    )
    async def test_bounds_are_400(self, client, tenant, body, error):
        [user] = await create_users(client, tenant, 1)
        response = await client.post(PATH, headers=tenant.r, json={"id": user["id"]} | body)
        assert (response.status_code, response.json()) == (400, {"errors": [error]})

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({}, "one of email, referenceId or id is required"),
            ({"id": "nope"}, "id: Input should be a valid UUID"),
            ({"email": "nope"}, "email: value is not a valid email address"),
        ],
    )
    async def test_a_user_reference_is_required(self, client, tenant, body, error):
        response = await client.post(PATH, headers=tenant.r, json=body)
        assert response.status_code == 400
        [message] = response.json()["errors"]
        assert message.startswith(error), message

    async def test_lists_what_the_user_owns_now_oldest_item_first(self, client, tenant, other):
        ticket = await create_product(client, tenant, is_transferable=True, redemption_quantity=3)
        perk = await create_product(client, tenant, type="perks", is_transferable=True)
        user, friend = await create_users(client, tenant, 2)
        [first] = await issue_items(client, tenant, ticket["id"], user["id"])
        [given_away] = await issue_items(client, tenant, perk["id"], user["id"])
        [received] = await issue_items(client, tenant, ticket["id"], friend["id"])
        [last] = await issue_items(client, tenant, perk["id"], user["id"])
        await issue_items(client, tenant, ticket["id"], friend["id"])
        for item, product, sender, recipient in (
            (received, ticket, friend, user),
            (given_away, perk, user, friend),
        ):
            response = await transfer_item(
                client, tenant, product["id"], item["id"], sender, recipient
            )
            assert response.status_code == 200, response.text
        # The same email in another project names another user.
        [twin] = await create_users(client, other, 1, email=user["email"])
        theirs = await create_product(client, other)
        await issue_items(client, other, theirs["id"], twin["id"])

        response = await client.post(PATH, headers=tenant.r, json={"id": user["id"]})
        assert response.status_code == 200
        body = response.json()
        moved = body["items"][1]
        assert datetime.fromisoformat(moved["updated_at"]) > datetime.fromisoformat(
            received["updated_at"]
        )
        assert body == {
            "items": [
                first,
                received | {"user": owner(user), "updated_at": moved["updated_at"]},
                last,
            ],
            "pagination": {"page": 1, "limit": 20, "total": 3},
        }
        assert [(i["product"]["id"], i["item_id"]) for i in body["items"]] == [
            (ticket["id"], 1),
            (ticket["id"], 2),
            (perk["id"], 2),
        ]
        assert first["product"] == {
            "id": ticket["id"],
            "name": ticket["name"],
            "type": "admission",
            "redemption_quantity": 3,
        }
        for ref in ({"email": user["email"].upper()}, {"referenceId": user["referenceId"]}):
            assert (await client.post(PATH, headers=tenant.r, json=ref)).json() == body

    async def test_pages(self, client, tenant):
        product = await create_product(client, tenant)
        [user] = await create_users(client, tenant, 1)
        issued = await issue_items(client, tenant, product["id"], *[user["id"]] * 3)
        # Items issued together were created at the same moment: ties go by id.
        assert len({item["created_at"] for item in issued}) == 1
        ordered = sorted(issued, key=lambda item: item["id"])
        first = await client.post(PATH, headers=tenant.r, json={"id": user["id"], "limit": 2})
        assert first.json() == {
            "items": ordered[:2],
            "pagination": {"page": 1, "limit": 2, "total": 3},
        }
        second = await client.post(
            PATH, headers=tenant.r, json={"id": user["id"], "page": 2, "limit": 2}
        )
        assert second.json() == {
            "items": ordered[2:],
            "pagination": {"page": 2, "limit": 2, "total": 3},
        }
        past = await client.post(
            PATH, headers=tenant.r, json={"id": user["id"], "page": 3, "limit": 2.0}
        )
        assert past.json() == {"items": [], "pagination": {"page": 3, "limit": 2, "total": 3}}

    async def test_a_user_without_items(self, client, tenant):
        [user] = await create_users(client, tenant, 1)
        response = await client.post(PATH, headers=tenant.r, json={"id": user["id"]})
        assert response.json() == {"items": [], "pagination": {"page": 1, "limit": 20, "total": 0}}
