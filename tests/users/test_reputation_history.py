"""POST /v1/users/reputation/history: a user's reputation balance and its entries."""

import uuid

import pytest

from tests.factories import create_users

PATH = "/v1/users/reputation/history"


async def _adjust(client, tenant, user, delta, reason):
    response = await client.post(
        "/v1/users/reputation",
        headers=tenant.w,
        json={"id": user["id"], "delta": delta, "reason": reason},
    )
    assert response.status_code == 201, response.text
    return response.json()


def _entry(adjusted):
    return {key: adjusted[key] for key in ("delta", "balance", "reason", "createdAt")}


class TestReputationHistory:
    async def test_needs_a_credential(self, client, tenant):
        [user] = await create_users(client, tenant, 1)
        assert (await client.post(PATH, json={"id": user["id"]})).status_code == 401

    async def test_another_projects_user_is_404(self, client, tenant, other):
        [theirs] = await create_users(client, other, 1)
        await _adjust(client, other, theirs, 3, "theirs")
        for ref in ({"id": theirs["id"]}, {"email": theirs["email"]}, {"id": str(uuid.uuid4())}):
            response = await client.post(PATH, headers=tenant.r, json=ref)
            assert (response.status_code, response.json()) == (404, {"message": "user not found"})

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({"page": 0}, "page: Input should be greater than or equal to 1"),
            ({"page": 1_000_001}, "page: Input should be less than or equal to 1000000"),
            ({"limit": 0}, "limit: Input should be greater than or equal to 1"),
            ({"limit": 101}, "limit: Input should be less than or equal to 100"),
            ({"page": "2"}, "page: Input should be a valid integer"),
            ({"delta": 1}, "delta: unknown field"),
        ],
    )
    async def test_bounds_are_400(self, client, tenant, body, error):
        [user] = await create_users(client, tenant, 1)
        response = await client.post(PATH, headers=tenant.r, json={"id": user["id"]} | body)
        assert (response.status_code, response.json()) == (400, {"errors": [error]})

    async def test_a_user_reference_is_required(self, client, tenant):
        response = await client.post(PATH, headers=tenant.r, json={"page": 1})
        assert (response.status_code, response.json()) == (
            400,
            {"errors": ["one of email, referenceId or id is required"]},
        )

    async def test_balance_and_entries_oldest_first(self, client, tenant, other):
        user, neighbour = await create_users(client, tenant, 2)
        adjusted = [
            await _adjust(client, tenant, user, 5, "welcome"),
            await _adjust(client, tenant, neighbour, 7, "not theirs"),
            await _adjust(client, tenant, user, 3, "helped"),
            await _adjust(client, tenant, user, -2, "late"),
        ]
        mine = [adjusted[0], adjusted[2], adjusted[3]]
        response = await client.post(PATH, headers=tenant.r, json={"id": user["id"]})
        assert response.status_code == 200
        assert response.json() == {
            "userId": user["id"],
            "balance": 6,
            "entries": [_entry(a) for a in mine],
            "pagination": {"page": 1, "limit": 20, "total": 3},
        }
        assert [(a["delta"], a["balance"], a["reason"]) for a in mine] == [
            (5, 5, "welcome"),
            (3, 8, "helped"),
            (-2, 6, "late"),
        ]
        by_email = await client.post(PATH, headers=tenant.r, json={"email": user["email"].upper()})
        assert by_email.json() == response.json()

    async def test_pages(self, client, tenant):
        [user] = await create_users(client, tenant, 1)
        adjusted = [await _adjust(client, tenant, user, n, f"step {n}") for n in (1, 2, 4)]
        response = await client.post(
            PATH, headers=tenant.r, json={"referenceId": user["referenceId"], "page": 2, "limit": 2}
        )
        assert response.json() == {
            "userId": user["id"],
            "balance": 7,
            "entries": [_entry(adjusted[2])],
            "pagination": {"page": 2, "limit": 2, "total": 3},
        }

    async def test_a_user_without_entries(self, client, tenant):
        [user] = await create_users(client, tenant, 1)
        response = await client.post(PATH, headers=tenant.r, json={"id": user["id"]})
        assert response.json() == {
            "userId": user["id"],
            "balance": 0,
            "entries": [],
            "pagination": {"page": 1, "limit": 20, "total": 0},
        }
