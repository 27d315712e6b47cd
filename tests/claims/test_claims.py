"""The public side of claim links: the view of what a link offers, and claiming an item."""

import asyncio
import time
import uuid

import pytest
from sqlalchemy import func, select, update

from tessera.claims.limiter import ClaimLimiter
from tessera.db import windows
from tessera.models import Claim, ClaimLink, IdempotencyKey, Product, Project
from tests import orm
from tests.claims.conftest import claimable, from_address
from tests.claims.test_limiter import Clock
from tests.factories import (
    create_claim_link,
    create_event,
    create_user,
    create_users,
    row_counts,
    user_body,
)


async def expire(database, link_id: str) -> None:
    async with orm.session(database) as session:
        await session.execute(
            update(ClaimLink)
            .where(ClaimLink.id == uuid.UUID(link_id))
            .values(expires_at=int(time.time()) - 1)
        )
        await session.commit()


async def set_product(database, product_id: str, **values) -> None:
    async with orm.session(database) as session:
        await session.execute(
            update(Product).where(Product.id == uuid.UUID(product_id)).values(**values)
        )
        await session.commit()


async def claim(client, link: dict, email: str, **extra):
    return await client.post(f"/v1/claims/{link['token']}", json={"email": email, **extra})


class TestViewClaim:
    async def test_what_the_link_offers_and_nothing_else(self, client, tenant):
        event = await create_event(client, tenant)
        expires = int(time.time()) + 600
        _, link = await claimable(
            client,
            tenant,
            name="Summer pass",
            description="Entry for one",
            event_id=event["id"],
            link={"max_claims": 4, "expires_at": expires, "reference_id": "r-1"},
        )
        response = await client.get(f"/v1/claims/{link['token']}")
        assert response.status_code == 200
        assert response.json() == {
            "product": {"name": "Summer pass", "description": "Entry for one", "type": "admission"},
            "event": {
                "name": event["name"],
                "description": event["description"],
                "location": event["location"],
                "address": event["address"],
                "start_date": event["start_date"],
                "end_date": event["end_date"],
            },
            "claims_left": 4,
            "expires_at": expires,
            "quantity": 1,
        }

    async def test_a_product_without_an_event(self, client, tenant):
        _, link = await claimable(client, tenant)
        response = await client.get(f"/v1/claims/{link['token']}")
        assert response.status_code == 200 and response.json()["event"] is None

    async def test_an_unknown_token_is_not_found(self, client, tenant):
        for token in ("tcl_unknown", "x" * 300):
            response = await client.get(f"/v1/claims/{token}")
            assert response.status_code == 404
            assert response.json() == {"message": "claim link not found"}

    async def test_expired_is_gone(self, client, tenant, database):
        _, link = await claimable(client, tenant)
        await expire(database, link["id"])
        response = await client.get(f"/v1/claims/{link['token']}")
        assert response.status_code == 410
        assert response.json() == {"message": "this claim link has expired"}

    async def test_used_up_is_gone(self, client, tenant, limiter):
        _, link = await claimable(client, tenant)
        assert (await claim(client, link, "a@example.com")).status_code == 201
        response = await client.get(f"/v1/claims/{link['token']}")
        assert response.status_code == 410
        assert response.json() == {
            "message": "this claim link is used up: every claim it allows was made"
        }


class TestClaim:
    async def test_a_new_person_gets_an_activated_user_with_a_wallet_and_the_item(
        self, client, tenant, limiter
    ):
        product, link = await claimable(client, tenant, link={"max_claims": 2})
        before = (await client.get("/v1/users/count", headers=tenant.r)).json()["count"]
        response = await claim(client, link, "New.Person@Example.com", firstName="Ada")
        assert response.status_code == 201
        body = response.json()
        assert set(body) == {
            "user_id",
            "product_item",
            "product_items",
            "ticket_url",
            "ticket_urls",
        }
        assert body["ticket_url"].startswith("http://tessera.test/tickets/")
        assert body["product_items"] == [body["product_item"]]
        assert body["ticket_urls"] == [body["ticket_url"]]
        item = body["product_item"]
        assert {k: v for k, v in item.items() if k != "id"} == {
            "item_id": 1,
            "product_id": product["id"],
            "product_name": product["name"],
            "product_type": "admission",
            "redemption_count": 0,
            "redemption_quantity": 1,
            "is_fully_redeemed": False,
            "redeemed_at": None,
        }
        profile = await client.post(
            "/v1/users/profile", headers=tenant.r, json={"email": "new.person@example.com"}
        )
        user = profile.json()
        assert user["id"] == body["user_id"]
        assert (user["firstName"], user["lastName"], user["isActivated"]) == ("Ada", None, True)
        assert [w["custody"] for w in user["wallets"]] == ["custodial"]
        after = (await client.get("/v1/users/count", headers=tenant.r)).json()["count"]
        assert after == before + 1
        link_now = await client.get(
            f"/v1/products/{product['id']}/claim-links/{link['id']}", headers=tenant.r
        )
        assert link_now.json()["claims"] == 1

    async def test_a_known_person_is_found_by_email(self, client, tenant, limiter):
        user = await create_user(client, tenant, email="known@example.com")
        _, link = await claimable(client, tenant)
        response = await claim(client, link, "KNOWN@example.com", firstName="Other")
        assert response.status_code == 201
        assert response.json()["user_id"] == user["id"]
        profile = await client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
        # The claim does not rename the user, nor activate one it did not create.
        assert profile.json()["firstName"] == user["firstName"]
        assert profile.json()["isActivated"] is False

    async def test_the_same_email_gets_its_first_item_back_even_once_used_up(
        self, client, tenant, limiter, database
    ):
        _, link = await claimable(client, tenant)
        first = await claim(client, link, "twice@example.com")
        assert first.status_code == 201
        counts = await row_counts(database)
        again = await claim(client, link, "Twice@Example.com")
        assert again.status_code == 200
        # The same item; its ticket's page for the first claim only (anyone with the link can
        # send that email).
        assert again.json() == first.json() | {"ticket_url": None, "ticket_urls": None}
        assert first.json()["ticket_url"] is not None
        assert await row_counts(database) == counts
        other = await claim(client, link, "someone@example.com")
        assert other.status_code == 410

    async def test_a_link_for_one_email(self, client, tenant, limiter, database):
        _, link = await claimable(client, tenant, link={"email": "only@example.com"})
        counts = await row_counts(database)
        refused = await claim(client, link, "other@example.com")
        assert refused.status_code == 403
        assert refused.json() == {"message": "this claim link was made for another email address"}
        assert await row_counts(database) == counts
        assert (await claim(client, link, "only@example.com")).status_code == 201

    async def test_expired(self, client, tenant, limiter, database):
        _, link = await claimable(client, tenant)
        await expire(database, link["id"])
        response = await claim(client, link, "late@example.com")
        assert response.status_code == 410
        assert response.json() == {"message": "this claim link has expired"}

    async def test_unknown_token(self, client, tenant, limiter):
        response = await client.post("/v1/claims/tcl_nope", json={"email": "a@example.com"})
        assert response.status_code == 404
        assert response.json() == {"message": "claim link not found"}

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"active": False}, "product is not active"),
            ({"is_claimable": False}, "product is not claimable"),
            ({"stock": 1, "issued_count": 1}, "product is out of stock: 0 left, 1 requested"),
            ({"min_rep_balance": 5}, "min_rep_balance is 5: rule@example.com has 0"),
        ],
    )
    async def test_each_issuing_rule_refuses_and_changes_nothing(
        self, client, tenant, limiter, database, change, message
    ):
        product, link = await claimable(client, tenant)
        await set_product(database, product["id"], **change)
        counts = await row_counts(database)
        response = await claim(client, link, "rule@example.com")
        assert response.status_code == 409
        assert response.json() == {"message": message}
        assert await row_counts(database) == counts  # no user, item or claim left behind

    async def test_max_per_account_counts_items_held_otherwise(self, client, tenant, limiter):
        product, link = await claimable(client, tenant, max_per_account=1)
        second = await create_claim_link(client, tenant, product["id"])
        assert (await claim(client, link, "one@example.com")).status_code == 201
        response = await claim(client, second, "one@example.com")
        assert response.status_code == 409
        assert response.json()["message"].startswith("max_per_account is 1")

    async def test_the_activation_rule_applies_to_people_it_did_not_create(
        self, client, tenant, limiter, database
    ):
        async with orm.session(database) as session:
            await session.execute(
                update(Project)
                .where(Project.id == tenant.project_id)
                .values(require_activation=True)
            )
            await session.commit()
        await create_user(client, tenant, email="dormant@example.com")
        _, link = await claimable(client, tenant, link={"max_claims": 2})
        refused = await claim(client, link, "dormant@example.com")
        assert refused.status_code == 409
        assert "activated" in refused.json()["message"]
        assert (await claim(client, link, "fresh@example.com")).status_code == 201

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({}, "email: field required"),
            ({"email": "nope"}, "email: value is not a valid email address"),
            ({"email": "a@example.com", "phone": "1"}, "phone: unknown field"),
            ({"email": "a@example.com", "firstName": "x" * 256}, "firstName: String should"),
        ],
    )
    async def test_bounds(self, client, tenant, limiter, database, body, error):
        _, link = await claimable(client, tenant)
        counts = await row_counts(database)
        response = await client.post(f"/v1/claims/{link['token']}", json=body)
        assert response.status_code == 400
        [message] = response.json()["errors"]
        assert message.startswith(error)
        assert await row_counts(database) == counts


class TestConcurrentClaims:
    async def test_fifty_people_never_claim_more_than_max_claims(
        self, client, tenant, limiter, database
    ):
        _, link = await claimable(client, tenant, link={"max_claims": 10})
        responses = await asyncio.gather(
            *(claim(client, link, f"crowd{n}@example.com") for n in range(50))
        )
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [201] * 10 + [410] * 40
        item_ids = sorted(
            r.json()["product_item"]["item_id"] for r in responses if r.status_code == 201
        )
        assert item_ids == list(range(1, 11))
        async with orm.session(database, write=False) as session:
            claims = await session.scalar(select(func.count()).select_from(Claim))
            counted = await session.scalar(select(ClaimLink.claims))
            issued = await session.scalar(select(Product.issued_count))
        assert (claims, counted, issued) == (10, 10, 10)

    async def test_one_new_email_on_many_links_at_once_is_one_user(self, client, tenant, limiter):
        await create_users(client, tenant, 3)
        product = (await claimable(client, tenant))[0]
        links = [await create_claim_link(client, tenant, product["id"]) for _ in range(10)]
        responses = await asyncio.gather(
            *(claim(client, link, "same@example.com") for link in links)
        )
        assert [r.status_code for r in responses] == [201] * 10
        assert len({r.json()["user_id"] for r in responses}) == 1
        fetched = await client.post(
            "/v1/users/fetch", headers=tenant.r, json={"email": "same@example.com"}
        )
        assert fetched.json()["total"] == 1
        # Counted and numbered once: the fourth user, on the page after the first three.
        page = await client.post("/v1/users/fetch", headers=tenant.r, json={"offset": 3})
        assert page.json()["total"] == 4
        assert [u["email"] for u in page.json()["users"]] == ["same@example.com"]


class TestRateLimits:
    async def test_per_address_with_retry_after(self, app, tenant):
        app.state.claim_limiter = ClaimLimiter(per_address=3, per_link=100)
        try:
            async with from_address(app, "10.0.0.1") as one, from_address(app, "10.0.0.2") as two:
                _, link = await claimable(one, tenant, link={"max_claims": 10})
                for n in range(3):
                    assert (await claim(one, link, f"a{n}@example.com")).status_code == 201
                refused = await claim(one, link, "a9@example.com")
                assert refused.status_code == 429
                assert refused.json() == {
                    "message": "too many claims from this address: at most 3 a minute"
                }
                assert 1 <= int(refused.headers["retry-after"]) <= 60
                # Another address is not held back.
                assert (await claim(two, link, "b@example.com")).status_code == 201
        finally:
            app.state.claim_limiter = ClaimLimiter(per_address=30, per_link=120)

    async def test_per_link(self, app, tenant):
        app.state.claim_limiter = ClaimLimiter(per_address=100, per_link=2)
        try:
            async with from_address(app, "10.0.1.1") as client:
                product, link = await claimable(client, tenant, link={"max_claims": 10})
                other_link = await create_claim_link(client, tenant, product["id"])
                assert (await claim(client, link, "c1@example.com")).status_code == 201
                assert (await claim(client, link, "c2@example.com")).status_code == 201
                refused = await claim(client, link, "c3@example.com")
                assert refused.status_code == 429
                assert refused.json() == {
                    "message": "too many claims from this link: at most 2 a minute"
                }
                # Another link is not held back.
                assert (await claim(client, other_link, "c3@example.com")).status_code == 201
        finally:
            app.state.claim_limiter = ClaimLimiter(per_address=30, per_link=120)

    async def test_a_refused_attempt_is_not_counted_and_changes_nothing(
        self, app, tenant, database, monkeypatch
    ):
        clock = Clock()  # the windows' time, moved below: not how fast the machine answers
        monkeypatch.setattr(windows, "time", clock)
        app.state.claim_limiter = ClaimLimiter(per_address=2, per_link=100, window_seconds=1)
        try:
            async with from_address(app, "10.0.2.1") as client:
                _, link = await claimable(client, tenant, link={"max_claims": 10})
                assert (await claim(client, link, "d1@example.com")).status_code == 201
                assert (await claim(client, link, "d2@example.com")).status_code == 201
                clock.now += 0.5
                counts = await row_counts(database)
                for n in range(5):
                    assert (await claim(client, link, f"e{n}@example.com")).status_code == 429
                assert await row_counts(database) == counts
                # The two counted attempts leave the 1 s window; the five refused ones, made
                # within the last second, would still fill it if they had been counted.
                clock.now += 0.6
                assert (await claim(client, link, "d3@example.com")).status_code == 201
        finally:
            app.state.claim_limiter = ClaimLimiter(per_address=30, per_link=120)


class TestIdempotencyKeys:
    """The public claim takes an Idempotency-Key too, kept within its claim link."""

    async def test_a_retried_claim_gets_the_first_answer(self, client, tenant, database, limiter):
        _, link = await claimable(client, tenant)
        path = f"/v1/claims/{link['token']}"
        body = {"email": "ada@example.com"}
        first = await client.post(path, headers={"Idempotency-Key": "c"}, json=body)
        assert first.status_code == 201
        counts = await row_counts(database)
        again = await client.post(path, headers={"Idempotency-Key": "c"}, json=body)
        assert (again.status_code, again.json()) == (201, first.json())
        assert again.headers["idempotent-replayed"] == "true"
        assert await row_counts(database) == counts
        other = await client.post(
            path, headers={"Idempotency-Key": "c"}, json={"email": "bob@example.com"}
        )
        assert other.status_code == 422

    async def test_keys_belong_to_a_link(self, client, tenant, database, limiter):
        product, first_link = await claimable(client, tenant)
        second_link = await create_claim_link(client, tenant, product["id"])
        answers = [
            await client.post(
                f"/v1/claims/{link['token']}",
                headers={"Idempotency-Key": "same"},
                json={"email": f"{n}@example.com"},
            )
            for n, link in enumerate((first_link, second_link))
        ]
        assert [a.status_code for a in answers] == [201, 201]
        assert all("idempotent-replayed" not in a.headers for a in answers)
        assert {r.scope for r in await records(database)} == {
            first_link["id"],
            second_link["id"],
        }
        # A project credential's key of the same text is the project's own.
        mine = await client.post(
            "/v1/users/create", headers=tenant.w | {"Idempotency-Key": "same"}, json=[user_body()]
        )
        assert mine.status_code == 201 and "idempotent-replayed" not in mine.headers

    async def test_an_unknown_link_is_404_and_not_recorded(self, client, database, limiter):
        response = await client.post(
            "/v1/claims/tcl_unknown", headers={"Idempotency-Key": "c"}, json={"email": "a@b.co"}
        )
        assert response.status_code == 404
        assert await records(database) == []

    async def test_a_rate_limited_claim_is_not_kept(self, app, client, tenant, database):
        _, link = await claimable(client, tenant)
        path = f"/v1/claims/{link['token']}"
        body = {"email": "ada@example.com"}
        limiter = app.state.claim_limiter
        app.state.claim_limiter = ClaimLimiter(per_address=0, per_link=0)
        try:
            refused = await client.post(path, headers={"Idempotency-Key": "c"}, json=body)
        finally:
            app.state.claim_limiter = limiter
        assert refused.status_code == 429
        assert await records(database) == []
        claimed = await client.post(path, headers={"Idempotency-Key": "c"}, json=body)
        assert claimed.status_code == 201 and "idempotent-replayed" not in claimed.headers


async def records(database) -> list[IdempotencyKey]:
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(IdempotencyKey)))
