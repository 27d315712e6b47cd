import httpx
import pytest
from fastapi import FastAPI

from tessera.claims.limiter import ClaimLimiter
from tests.factories import Tenant, create_claim_link, create_product


@pytest.fixture
def limiter(app: FastAPI):
    """Room for the many claims of a test from one address; restored after it."""
    settings = app.state.settings
    app.state.claim_limiter = ClaimLimiter(per_address=10_000, per_link=10_000)
    yield app.state.claim_limiter
    app.state.claim_limiter = ClaimLimiter(
        per_address=settings.claim_rate_per_address, per_link=settings.claim_rate_per_link
    )


def from_address(app: FastAPI, address: str) -> httpx.AsyncClient:
    """A client whose requests come from ``address``."""
    transport = httpx.ASGITransport(app=app, client=(address, 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://tessera.test")


async def claimable(client: httpx.AsyncClient, tenant: Tenant, **product) -> tuple[dict, dict]:
    """A claimable product and a link for it (``link`` keyword: the link's body)."""
    link_body = product.pop("link", {})
    created = await create_product(client, tenant, is_claimable=True, **product)
    return created, await create_claim_link(client, tenant, created["id"], **link_body)
