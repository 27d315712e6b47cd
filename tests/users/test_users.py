import asyncio
import uuid

import pytest
import sr25519
from scalecodec.utils.ss58 import ss58_decode
from sqlalchemy import func, select

from tessera.chain.keys import open_seed
from tessera.models import User, UserWallet
from tessera.toolkit.crypto import Sealed
from tests import orm
from tests.factories import create_user, create_users, row_counts, user_body

USER_KEYS = {"id", "isActivated", "activatedOn", "firstName", "lastName", "email", "referenceId"}


class TestCreateUsers:
    async def test_needs_a_credential(self, client, tenant):
        response = await client.post("/v1/users/create", json=[user_body()])
        assert response.status_code == 401 and set(response.json()) == {"message"}

    async def test_read_credential_is_403(self, client, tenant):
        response = await client.post("/v1/users/create", headers=tenant.r, json=[user_body()])
        assert response.status_code == 403

    async def test_creates_users_with_custodial_wallets(self, client, tenant, app, database):
        body = [user_body(email="Ada@Example.com"), {"email": "bare@example.com"}]
        response = await client.post("/v1/users/create", headers=tenant.w, json=body)
        assert response.status_code == 201
        data = response.json()
        assert data["message"] == "2 users created"
        ada, bare = data["users"]
        assert set(ada) == USER_KEYS | {"wallets"}
        assert ada["email"] == "ada@example.com"  # emails are stored lowercased
        assert (ada["firstName"], ada["lastName"]) == (body[0]["firstName"], body[0]["lastName"])
        assert ada["referenceId"] == body[0]["referenceId"]
        assert ada["isActivated"] is False and ada["activatedOn"] is None
        assert bare["firstName"] is None and bare["referenceId"] is None
        [wallet] = ada["wallets"]
        assert set(wallet) == {"id", "type", "address", "custody"}
        assert (wallet["type"], wallet["custody"]) == ("Polkadot", "custodial")
        # The address is the SS58 (prefix 42) of a real sr25519 key whose sealed seed we hold.
        public_key = bytes.fromhex(ss58_decode(wallet["address"], valid_ss58_format=42))
        async with orm.session(database, write=False) as session:
            row = await session.scalar(
                select(UserWallet).where(UserWallet.id == uuid.UUID(wallet["id"]))
            )
        assert row.public_key == public_key and row.secret_key_id == "k1"
        seed = open_seed(
            app.state.box,
            public_key=row.public_key,
            secret=Sealed(row.secret_key_id, row.secret_blob),
        )
        assert sr25519.pair_from_seed(seed)[0] == public_key
        assert seed not in row.secret_blob and seed.hex() not in response.text

    async def test_batch_of_1500(self, client, tenant):
        body = [{"email": f"bulk{i}@example.com"} for i in range(1500)]
        response = await client.post("/v1/users/create", headers=tenant.w, json=body)
        assert response.status_code == 201
        users = response.json()["users"]
        assert len(users) == 1500 and len({u["wallets"][0]["address"] for u in users}) == 1500
        # Time-ordered ids (models.base.new_id): a batch adds to the end of the id indexes.
        ids = [uuid.UUID(u["id"]) for u in users]
        assert {i.version for i in ids} == {7} and ids == sorted(ids)
        listed = await client.post("/v1/users/fetch", headers=tenant.r, json={"limit": 3})
        assert [u["email"] for u in listed.json()["users"]] == [
            f"bulk{i}@example.com" for i in range(3)
        ]

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ([], "List should have at least 1 item"),
            ({"email": "a@example.com"}, "Input should be a valid list"),
            ([{"firstName": "x"}], "0.email: field required"),
            ([{"email": "not-an-email"}], "0.email: value is not a valid email address"),
            (
                [{"email": "a@example.com", "firstName": "x" * 256}],
                "0.firstName: String should have at most 255",
            ),
            (
                [{"email": "a@example.com", "referenceId": ""}],
                "0.referenceId: String should have at least 1",
            ),
            ([{"email": 42}], "0.email: Input should be a valid string"),
        ],
    )
    async def test_invalid_bodies_are_400(self, client, tenant, database, body, error):
        before = await row_counts(database)
        response = await client.post("/v1/users/create", headers=tenant.w, json=body)
        assert response.status_code == 400
        assert any(error in e for e in response.json()["errors"]), response.json()
        assert await row_counts(database) == before

    async def test_more_than_1500_is_400(self, client, tenant):
        body = [{"email": f"u{i}@example.com"} for i in range(1501)]
        response = await client.post("/v1/users/create", headers=tenant.w, json=body)
        assert response.status_code == 400
        assert response.json() == {
            "errors": ["List should have at most 1500 items after validation, not 1501"]
        }

    async def test_duplicates_in_the_batch_are_400_and_create_nothing(
        self, client, tenant, database
    ):
        before = await row_counts(database)
        body = [
            user_body(email="x@example.com", referenceId="r"),
            user_body(email="X@example.com", referenceId="r"),
        ]
        response = await client.post("/v1/users/create", headers=tenant.w, json=body)
        assert response.status_code == 400
        assert response.json() == {
            "errors": [
                "email: 'x@example.com' appears 2 times in the batch",
                "referenceId: 'r' appears 2 times in the batch",
            ]
        }
        assert await row_counts(database) == before
        total = await client.post("/v1/users/fetch", headers=tenant.r, json={})
        assert total.json()["total"] == 0

    async def test_taken_email_or_reference_is_409_and_creates_nothing(self, client, tenant):
        await create_user(client, tenant, email="taken@example.com", referenceId="ref-taken")
        response = await client.post(
            "/v1/users/create",
            headers=tenant.w,
            json=[user_body(), user_body(email="TAKEN@example.com")],
        )
        assert response.status_code == 409
        assert response.json() == {
            "message": "email already registered in this project: taken@example.com"
        }
        response = await client.post(
            "/v1/users/create", headers=tenant.w, json=[user_body(referenceId="ref-taken")]
        )
        assert response.status_code == 409
        assert response.json() == {"message": "referenceId already used in this project: ref-taken"}
        assert (await client.post("/v1/users/fetch", headers=tenant.r, json={})).json()[
            "total"
        ] == 1

    async def test_the_same_email_in_another_project_is_fine(self, client, tenant, other):
        await create_user(client, tenant, email="shared@example.com")
        await create_user(client, other, email="shared@example.com")


class TestFetchUser:
    async def test_needs_a_credential(self, client, tenant):
        assert (
            await client.post("/v1/users/profile", json={"email": "a@example.com"})
        ).status_code == 401

    async def test_returns_the_user_with_wallet_ids(self, client, tenant):
        user = await create_user(client, tenant)
        response = await client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
        assert response.status_code == 200
        assert response.json() == user

    async def test_priority_is_email_then_reference_then_id(self, client, tenant):
        a, b, c = await create_users(client, tenant, 3)
        body = {"id": c["id"], "referenceId": b["referenceId"], "email": a["email"]}
        assert (await client.post("/v1/users/profile", headers=tenant.r, json=body)).json()[
            "id"
        ] == a["id"]
        del body["email"]
        assert (await client.post("/v1/users/profile", headers=tenant.r, json=body)).json()[
            "id"
        ] == b["id"]
        del body["referenceId"]
        assert (await client.post("/v1/users/profile", headers=tenant.r, json=body)).json()[
            "id"
        ] == c["id"]

    async def test_another_projects_user_is_404(self, client, tenant, other):
        theirs = await create_user(client, other)
        for body in (
            {"id": theirs["id"]},
            {"email": theirs["email"]},
            {"referenceId": theirs["referenceId"]},
        ):
            response = await client.post("/v1/users/profile", headers=tenant.r, json=body)
            assert response.status_code == 404
            assert response.json() == {"message": "user not found"}

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({}, "one of email, referenceId or id is required"),
            ({"id": "not-a-uuid"}, "id: Input should be a valid UUID"),
            ({"email": "nope"}, "email: value is not a valid email address"),
            ({"referenceId": 7}, "referenceId: Input should be a valid string"),
        ],
    )
    async def test_invalid_identifiers_are_400(self, client, tenant, body, error):
        response = await client.post("/v1/users/profile", headers=tenant.r, json=body)
        assert response.status_code == 400
        assert any(error in e for e in response.json()["errors"]), response.json()


class TestFetchUsers:
    async def test_needs_a_credential(self, client, tenant):
        assert (await client.post("/v1/users/fetch", json={})).status_code == 401

    async def test_pages_through_the_projects_users_only(self, client, tenant, other):
        mine = await create_users(client, tenant, 5)
        await create_users(client, other, 2)
        response = await client.post(
            "/v1/users/fetch", headers=tenant.r, json={"limit": 2, "offset": 1}
        )
        assert response.status_code == 200
        data = response.json()
        assert data["total"] == 5
        assert [u["id"] for u in data["users"]] == [u["id"] for u in mine[1:3]]
        first = data["users"][0]
        assert set(first) == USER_KEYS | {"wallets"}
        assert first["wallets"] == [{k: v for k, v in mine[1]["wallets"][0].items() if k != "id"}]

    async def test_defaults_to_ten(self, client, tenant):
        await create_users(client, tenant, 12)
        for body in (None, {}):
            response = await client.post("/v1/users/fetch", headers=tenant.r, json=body)
            assert len(response.json()["users"]) == 10 and response.json()["total"] == 12

    async def test_narrowed_to_one_identifier(self, client, tenant, other):
        a, _ = await create_users(client, tenant, 2)
        theirs = await create_user(client, other)
        response = await client.post(
            "/v1/users/fetch", headers=tenant.r, json={"email": a["email"]}
        )
        assert [u["id"] for u in response.json()["users"]] == [a["id"]] and response.json()[
            "total"
        ] == 1
        response = await client.post("/v1/users/fetch", headers=tenant.r, json={"id": theirs["id"]})
        assert response.json() == {"users": [], "total": 0}

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({"limit": 0}, "limit: Input should be greater than or equal to 1"),
            ({"limit": 1001}, "limit: Input should be less than or equal to 1000"),
            ({"limit": "10"}, "limit: Input should be a valid integer"),
            ({"offset": -1}, "offset: Input should be greater than or equal to 0"),
        ],
    )
    async def test_bounds_are_400(self, client, tenant, body, error):
        response = await client.post("/v1/users/fetch", headers=tenant.r, json=body)
        assert response.status_code == 400 and response.json() == {"errors": [error]}

    async def test_limit_1000_is_allowed(self, client, tenant):
        response = await client.post("/v1/users/fetch", headers=tenant.r, json={"limit": 1000})
        assert response.status_code == 200


class TestCountAndActivation:
    async def test_count_needs_a_credential(self, client, tenant):
        assert (await client.get("/v1/users/count")).status_code == 401

    async def test_activate_needs_a_write_credential(self, client, tenant):
        user = await create_user(client, tenant)
        assert (await client.post("/v1/users/activate", json={"id": user["id"]})).status_code == 401
        response = await client.post(
            "/v1/users/activate", headers=tenant.r, json={"id": user["id"]}
        )
        assert response.status_code == 403

    async def test_activation_is_counted_and_idempotent(self, client, tenant, other):
        a, b = await create_users(client, tenant, 2)
        theirs = await create_user(client, other)
        await client.post("/v1/users/activate", headers=other.w, json={"id": theirs["id"]})
        assert (await client.get("/v1/users/count", headers=tenant.r)).json() == {"count": 0}

        status = await client.post("/v1/users/activation", headers=tenant.r, json={"id": a["id"]})
        assert status.json() == {"activatedOn": None, "isActivated": False}
        first = await client.post(
            "/v1/users/activate", headers=tenant.w, json={"email": a["email"]}
        )
        assert first.status_code == 200
        assert (
            set(first.json()) == {"activatedOn", "isActivated"}
            and first.json()["isActivated"] is True
        )
        assert first.json()["activatedOn"].endswith("Z")
        again = await client.post(
            "/v1/users/activate", headers=tenant.w, json={"referenceId": a["referenceId"]}
        )
        assert again.json() == first.json()
        status = await client.post("/v1/users/activation", headers=tenant.r, json={"id": a["id"]})
        assert status.json() == first.json()
        assert (await client.get("/v1/users/count", headers=tenant.r)).json() == {"count": 1}
        profile = await client.post("/v1/users/profile", headers=tenant.r, json={"id": a["id"]})
        assert profile.json()["activatedOn"] == first.json()["activatedOn"]
        assert b["isActivated"] is False

    async def test_concurrent_activations_count_each_user_once(self, client, tenant, database):
        users = await create_users(client, tenant, 8)
        responses = await asyncio.gather(
            *(
                client.post("/v1/users/activate", headers=tenant.w, json={"id": user["id"]})
                for user in users * 3
            )
        )
        assert {response.status_code for response in responses} == {200}
        assert (await client.get("/v1/users/count", headers=tenant.r)).json() == {"count": 8}
        async with orm.session(database, write=False) as session:
            active = await session.scalar(
                select(func.count()).where(User.project_id == tenant.project_id, User.is_activated)
            )
        assert active == 8

    async def test_the_listing_total_counts_created_users_only(self, client, tenant, other):
        await create_users(client, tenant, 3)
        await create_users(client, other, 2)
        taken = await client.post(
            "/v1/users/create", headers=tenant.w, json=[user_body(), user_body()] * 1
        )
        assert taken.status_code == 201
        duplicate = await client.post(
            "/v1/users/create",
            headers=tenant.w,
            json=[{"email": taken.json()["users"][0]["email"]}],
        )
        assert duplicate.status_code == 409  # refused: counts nothing
        listing = await client.post("/v1/users/fetch", headers=tenant.r, json={"limit": 1})
        assert listing.json()["total"] == 5
        listing = await client.post("/v1/users/fetch", headers=other.r, json={})
        assert listing.json()["total"] == 2

    async def test_another_projects_user_is_404(self, client, tenant, other):
        theirs = await create_user(client, other)
        for path in ("/v1/users/activate", "/v1/users/activation"):
            response = await client.post(path, headers=tenant.w, json={"id": theirs["id"]})
            assert response.status_code == 404 and response.json() == {"message": "user not found"}
        status = await client.post(
            "/v1/users/activation", headers=other.r, json={"id": theirs["id"]}
        )
        assert status.json()["isActivated"] is False

    async def test_missing_identifier_is_400(self, client, tenant):
        for path in ("/v1/users/activate", "/v1/users/activation"):
            response = await client.post(path, headers=tenant.w, json={"email": ""})
            assert response.status_code == 400 and response.json()["errors"]


class TestReputation:
    async def test_needs_write(self, client, tenant):
        user = await create_user(client, tenant)
        body = {"id": user["id"], "delta": 1, "reason": "x"}
        assert (await client.post("/v1/users/reputation", json=body)).status_code == 401
        assert (
            await client.post("/v1/users/reputation", headers=tenant.r, json=body)
        ).status_code == 403

    async def test_adjusts_and_refuses_negative_balances(self, client, tenant):
        user = await create_user(client, tenant)
        up = await client.post(
            "/v1/users/reputation",
            headers=tenant.w,
            json={"id": user["id"], "delta": 5, "reason": "helped"},
        )
        assert up.status_code == 201
        body = up.json()
        assert set(body) == {"userId", "balance", "delta", "reason", "createdAt"}
        assert (body["userId"], body["balance"], body["delta"], body["reason"]) == (
            user["id"],
            5,
            5,
            "helped",
        )
        down = await client.post(
            "/v1/users/reputation",
            headers=tenant.w,
            json={"email": user["email"], "delta": -6, "reason": "x"},
        )
        assert down.status_code == 409
        assert down.json() == {
            "message": "reputation balance cannot go below 0 (balance 5, delta -6)"
        }
        down = await client.post(
            "/v1/users/reputation",
            headers=tenant.w,
            json={"id": user["id"], "delta": -5, "reason": "x"},
        )
        assert down.json()["balance"] == 0

    @pytest.mark.parametrize(
        ("extra", "error"),
        [
            ({"delta": 0, "reason": "x"}, "delta: must not be 0"),
            ({"delta": "1", "reason": "x"}, "delta: Input should be a valid integer"),
            (
                {"delta": 1_000_001, "reason": "x"},
                "delta: Input should be less than or equal to 1000000",
            ),
            ({"delta": 1, "reason": ""}, "reason: String should have at least 1 character"),
            ({"delta": 1}, "reason: field required"),
        ],
    )
    async def test_invalid_is_400(self, client, tenant, extra, error):
        user = await create_user(client, tenant)
        response = await client.post(
            "/v1/users/reputation", headers=tenant.w, json={"id": user["id"]} | extra
        )
        assert response.status_code == 400 and error in response.json()["errors"]

    async def test_another_projects_user_is_404(self, client, tenant, other):
        theirs = await create_user(client, other)
        response = await client.post(
            "/v1/users/reputation",
            headers=tenant.w,
            json={"id": theirs["id"], "delta": 1, "reason": "x"},
        )
        assert response.status_code == 404


class TestReadOnlyPosts:
    async def test_lookups_do_not_queue_behind_a_writer(self, client, tenant, database):
        import asyncio

        from sqlalchemy import update

        from tessera.models import User

        user = await create_user(client, tenant)
        async with orm.session(database) as writer:  # on SQLite: the single write slot
            await writer.execute(
                update(User).where(User.id == uuid.UUID(user["id"])).values(first_name="Held")
            )
            lookup = client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
            response = await asyncio.wait_for(lookup, timeout=10)
            assert response.status_code == 200
            assert response.json()["firstName"] == user["firstName"]  # uncommitted: not seen
            if database.is_sqlite:  # a write does wait for the slot
                write = client.post("/v1/users/activate", headers=tenant.w, json={"id": user["id"]})
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(write, timeout=0.5)
            await writer.rollback()
