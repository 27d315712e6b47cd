"""Claim links of a product: create, list, get, revoke (project credentials)."""

import time
import uuid

import pytest
from sqlalchemy import select

from tessera.models import ClaimLink
from tests import orm
from tests.claims.conftest import claimable
from tests.factories import create_claim_link, create_product

LINK_KEYS = {
    "id",
    "product_id",
    "token_hint",
    "status",
    "max_claims",
    "claims",
    "expires_at",
    "email",
    "reference_id",
    "revoked_at",
    "created_at",
    "updated_at",
}


def links_url(product_id: str) -> str:
    return f"/v1/products/{product_id}/claim-links"


class TestCreateClaimLink:
    async def test_needs_a_write_credential(self, client, tenant):
        product = await create_product(client, tenant, is_claimable=True)
        assert (await client.post(links_url(product["id"]), json={})).status_code == 401
        response = await client.post(links_url(product["id"]), headers=tenant.r, json={})
        assert response.status_code == 403

    async def test_another_projects_product_is_not_found(self, client, tenant, other):
        product = await create_product(client, other, is_claimable=True)
        response = await client.post(links_url(product["id"]), headers=tenant.w, json={})
        assert response.status_code == 404
        assert response.json() == {"message": "product not found"}

    async def test_the_product_must_be_claimable(self, client, tenant):
        product = await create_product(client, tenant)
        response = await client.post(links_url(product["id"]), headers=tenant.w, json={})
        assert response.status_code == 409
        assert response.json() == {"message": "product is not claimable: set is_claimable first"}

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({"max_claims": 0}, "max_claims: Input should be greater than or equal to 1"),
            ({"max_claims": "2"}, "max_claims: Input should be a valid integer"),
            ({"expires_at": 1}, "expires_at: must be in the future"),
            ({"email": "not-an-email"}, "email: value is not a valid email address"),
            ({"reference_id": ""}, "reference_id: String should have at least 1 character"),
            ({"token": "mine"}, "token: unknown field"),
        ],
    )
    async def test_bounds(self, client, tenant, body, error):
        product = await create_product(client, tenant, is_claimable=True)
        response = await client.post(links_url(product["id"]), headers=tenant.w, json=body)
        assert response.status_code == 400
        [message] = response.json()["errors"]
        assert message.startswith(error)

    async def test_a_reference_id_is_used_once_in_the_project(self, client, tenant):
        product = await create_product(client, tenant, is_claimable=True)
        await create_claim_link(client, tenant, product["id"], reference_id="spring")
        response = await client.post(
            links_url(product["id"]), headers=tenant.w, json={"reference_id": "spring"}
        )
        assert response.status_code == 409
        assert response.json() == {"message": "reference_id already used by a claim link"}

    async def test_defaults_and_the_token_shown_once(self, client, tenant, database):
        product, link = await claimable(client, tenant)
        assert set(link) == LINK_KEYS | {"token", "url"}
        token = link.pop("token")
        assert token.startswith("tcl_") and len(token) == 4 + 32  # 24 random bytes
        assert link.pop("url") == f"http://tessera.test/claim/{token}"
        assert link["token_hint"] == token[:10]
        assert {k: v for k, v in link.items() if k not in {"id", "created_at", "updated_at"}} == {
            "product_id": product["id"],
            "token_hint": token[:10],
            "status": "active",
            "max_claims": 1,
            "claims": 0,
            "expires_at": None,
            "email": None,
            "reference_id": None,
            "revoked_at": None,
        }
        async with orm.session(database, write=False) as session:
            row = await session.scalar(select(ClaimLink))
        assert token not in {row.token_hash, row.token_hint} and len(row.token_hash) == 64

    async def test_every_option(self, client, tenant):
        product = await create_product(client, tenant, is_claimable=True)
        expires = int(time.time()) + 3600
        link = await create_claim_link(
            client,
            tenant,
            product["id"],
            max_claims=5,
            expires_at=expires,
            email="Guest@Example.com",
            reference_id="vip-1",
        )
        assert (link["max_claims"], link["expires_at"], link["email"], link["reference_id"]) == (
            5,
            expires,
            "guest@example.com",
            "vip-1",
        )

    async def test_the_url_starts_with_the_public_url_when_set(self, client, tenant, settings):
        settings.public_url = "https://tickets.example.com/base"
        try:
            _, link = await claimable(client, tenant)
        finally:
            settings.public_url = None
        assert link["url"] == f"https://tickets.example.com/base/claim/{link['token']}"


class TestListClaimLinks:
    async def test_needs_a_credential(self, client, tenant):
        product, _ = await claimable(client, tenant)
        assert (await client.get(links_url(product["id"]))).status_code == 401

    async def test_another_projects_product_is_not_found(self, client, tenant, other):
        product, _ = await claimable(client, other)
        response = await client.get(links_url(product["id"]), headers=tenant.r)
        assert response.status_code == 404
        assert response.json() == {"message": "product not found"}

    async def test_paged_oldest_first_without_tokens(self, client, tenant):
        product = await create_product(client, tenant, is_claimable=True)
        made = [await create_claim_link(client, tenant, product["id"]) for _ in range(3)]
        await claimable(client, tenant)  # another product's link is not listed
        response = await client.get(
            links_url(product["id"]), headers=tenant.r, params={"limit": 2, "page": 2}
        )
        assert response.status_code == 200
        body = response.json()
        assert body["pagination"] == {"page": 2, "limit": 2, "total": 3}
        [listed] = body["claim_links"]
        assert set(listed) == LINK_KEYS
        expected = {k: v for k, v in made[2].items() if k not in {"token", "url"}}
        assert listed == expected

    @pytest.mark.parametrize("query", [{"limit": 0}, {"limit": 101}, {"page": 0}, {"x": 1}])
    async def test_bounds(self, client, tenant, query):
        product, _ = await claimable(client, tenant)
        response = await client.get(links_url(product["id"]), headers=tenant.r, params=query)
        assert response.status_code == 400
        assert list(response.json()) == ["errors"]


class TestGetClaimLink:
    async def test_needs_a_credential(self, client, tenant):
        product, link = await claimable(client, tenant)
        assert (await client.get(f"{links_url(product['id'])}/{link['id']}")).status_code == 401

    async def test_found_only_under_its_product_and_project(self, client, tenant, other):
        product, link = await claimable(client, tenant)
        another, _ = await claimable(client, tenant)
        theirs, their_link = await claimable(client, other)
        for path in (
            f"{links_url(another['id'])}/{link['id']}",
            f"{links_url(product['id'])}/{uuid.uuid4()}",
            f"{links_url(theirs['id'])}/{their_link['id']}",
        ):
            response = await client.get(path, headers=tenant.r)
            assert response.status_code == 404, path
            assert response.json() == {"message": "claim link not found"}

    async def test_shows_the_claims_used(self, client, tenant, limiter):
        product, link = await claimable(client, tenant, link={"max_claims": 3})
        claimed = await client.post(f"/v1/claims/{link['token']}", json={"email": "a@example.com"})
        assert claimed.status_code == 201
        response = await client.get(f"{links_url(product['id'])}/{link['id']}", headers=tenant.r)
        assert response.status_code == 200
        assert response.json()["claims"] == 1 and response.json()["status"] == "active"


class TestRevokeClaimLink:
    async def test_needs_a_write_credential(self, client, tenant):
        product, link = await claimable(client, tenant)
        path = f"{links_url(product['id'])}/{link['id']}"
        assert (await client.delete(path)).status_code == 401
        assert (await client.delete(path, headers=tenant.r)).status_code == 403

    async def test_another_projects_link_is_not_found(self, client, tenant, other):
        product, link = await claimable(client, other)
        response = await client.delete(f"{links_url(product['id'])}/{link['id']}", headers=tenant.w)
        assert response.status_code == 404
        view = await client.get(f"/v1/claims/{link['token']}")
        assert view.status_code == 200  # still open for its own project

    async def test_revoked_once_and_then_unknown_to_the_public(self, client, tenant, limiter):
        product, link = await claimable(client, tenant)
        path = f"{links_url(product['id'])}/{link['id']}"
        first = await client.delete(path, headers=tenant.w)
        assert first.status_code == 200
        revoked = first.json()
        assert revoked["status"] == "revoked" and revoked["revoked_at"] is not None
        again = await client.delete(path, headers=tenant.w)
        assert again.status_code == 200 and again.json()["revoked_at"] == revoked["revoked_at"]
        for response in (
            await client.get(f"/v1/claims/{link['token']}"),
            await client.post(f"/v1/claims/{link['token']}", json={"email": "a@example.com"}),
        ):
            assert response.status_code == 404
            assert response.json() == {"message": "claim link not found"}
