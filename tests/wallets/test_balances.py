"""Wallet balances read from a chain (``wallets.service.read_balances``): a user's wallets
(``POST /v1/users/balances``) and the project's (``GET /v1/projects/wallets/balances``), each on
the in-memory Asset Hub behind the app (tests/jobs): one entry per wallet, oldest first, its
address as the chain writes it, its free balance and its chain's units; another project's user
404, a chain not configured 409, one that does not answer 503."""

import time
from collections.abc import AsyncIterator

import httpx
import pytest
from scalecodec.utils.ss58 import ss58_decode, ss58_encode
from substrateinterface import Keypair, KeypairType

from tests.factories import create_user, linked
from tests.jobs.conftest import chain, client, jobs_app
from tests.jobs.memory_chain import DOT

__all__ = ["chain", "client", "jobs_app"]

UNREACHABLE = {
    "message": "chain AssetHub is unavailable: cannot reach ws://memory: connection refused"
}


@pytest.fixture
async def plain(app) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the suite's app, where only Westend Asset Hub is configured (unreachable)."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


def key(address: str) -> bytes:
    return bytes.fromhex(ss58_decode(address))


def entry(public_key: bytes, free: int, generated_at: int, *, on: str = "AssetHub") -> dict:
    prefix, symbol, decimals = {"AssetHub": (0, "DOT", 10), "WestendAssetHub": (42, "WND", 12)}[on]
    return {
        "address": ss58_encode(public_key, ss58_format=prefix),
        "type": "Polkadot",
        "code": 200,
        "message": "OK",
        "generated_at": generated_at,
        "data": [
            {
                "asset_id": "native",
                "balance": str(free),
                "name": on,
                "symbol": symbol,
                "decimals": decimals,
                "lock": "0",
            }
        ],
    }


async def balances(client, headers, **body) -> tuple[httpx.Response, int, int]:
    before = int(time.time())
    response = await client.post("/v1/users/balances", headers=headers, json=body)
    return response, before, int(time.time())


class TestUserBalances:
    async def test_needs_a_credential_and_a_read_key_will_do(self, client, chain, tenant):
        user = await create_user(client, tenant)
        response, _, _ = await balances(client, {}, id=user["id"])
        assert response.status_code == 401 and set(response.json()) == {"message"}
        response, _, _ = await balances(client, tenant.r, id=user["id"])
        assert response.status_code == 200, response.text

    async def test_each_wallet_oldest_first_on_the_first_configured_chain(
        self, client, chain, tenant
    ):
        user = await create_user(client, tenant)
        pair = Keypair.create_from_uri("//Tessera//balances", crypto_type=KeypairType.SR25519)
        await linked(client, tenant, user, pair)
        custodial = key(user["wallets"][0]["address"])
        chain.fund(custodial, 3 * DOT + 7)
        chain.fund(pair.public_key, 12)
        response, before, after = await balances(client, tenant.r, email=user["email"])
        assert response.status_code == 200, response.text
        answer = response.json()
        generated = answer[0]["generated_at"]
        assert before <= generated <= after
        assert answer == [
            entry(custodial, 3 * DOT + 7, generated),
            entry(pair.public_key, 12, generated),
        ]

    async def test_on_the_chain_asked_for_in_its_own_units(self, client, chain, tenant):
        user = await create_user(client, tenant)
        custodial = key(user["wallets"][0]["address"])
        chain.fund(custodial, 5)
        response, _, _ = await balances(client, tenant.r, id=user["id"], chain="WestendAssetHub")
        assert response.status_code == 200, response.text
        [shown] = response.json()
        assert shown == entry(custodial, 5, shown["generated_at"], on="WestendAssetHub")
        assert shown["address"] == user["wallets"][0]["address"]  # the project's prefix, 42

    async def test_an_unfunded_wallet_holds_nothing(self, client, chain, tenant):
        user = await create_user(client, tenant)
        response, _, _ = await balances(client, tenant.r, id=user["id"])
        [shown] = response.json()
        assert shown == entry(key(user["wallets"][0]["address"]), 0, shown["generated_at"])

    async def test_another_projects_or_an_unknown_user_is_404(self, client, chain, tenant, other):
        theirs = await create_user(client, other)
        chain.fund(key(theirs["wallets"][0]["address"]), DOT)
        for body in ({"id": theirs["id"]}, {"email": theirs["email"]}, {"email": "no@ex.com"}):
            response, _, _ = await balances(client, tenant.r, **body)
            assert (response.status_code, response.json()) == (404, {"message": "user not found"})

    async def test_an_unreachable_chain_is_503(self, client, chain, tenant):
        user = await create_user(client, tenant)
        chain.unreachable = True
        response, _, _ = await balances(client, tenant.r, id=user["id"])
        assert (response.status_code, response.json()) == (503, UNREACHABLE)

    async def test_an_unconfigured_or_unknown_chain(self, plain, tenant):
        user = await create_user(plain, tenant)
        response, _, _ = await balances(plain, tenant.r, id=user["id"], chain="AssetHub")
        assert (response.status_code, response.json()) == (
            409,
            {"message": "chain AssetHub is not configured: set TESSERA_CHAIN_ASSETHUB_RPC_URL"},
        )
        response, _, _ = await balances(plain, tenant.r, id=user["id"], chain="Ethereum")
        assert response.status_code == 400
        assert response.json()["errors"][0].startswith("chain: Input should be")
        response, _, _ = await balances(plain, tenant.r, chain="AssetHub")
        assert response.status_code == 400
        assert any("one of email, referenceId or id" in e for e in response.json()["errors"])


class TestProjectWalletBalances:
    PATH = "/v1/projects/wallets/balances"

    async def test_needs_a_credential(self, client, chain, tenant):
        response = await client.get(self.PATH)
        assert response.status_code == 401 and set(response.json()) == {"message"}

    async def test_the_projects_wallet_on_each_chain(self, client, chain, tenant, other):
        [wallet] = (await client.get("/v1/projects/wallets", headers=tenant.r)).json()
        assert wallet["addresses"] == {
            "AssetHub": ss58_encode(key(wallet["address"]), ss58_format=0),
            "WestendAssetHub": wallet["address"],
        }
        mine = key(wallet["address"])
        [their_wallet] = (await client.get("/v1/projects/wallets", headers=other.r)).json()
        chain.fund(mine, 2 * DOT)
        chain.fund(key(their_wallet["address"]), 9 * DOT)
        before = int(time.time())
        response = await client.get(self.PATH, headers=tenant.r)
        after = int(time.time())
        assert response.status_code == 200, response.text
        [shown] = response.json()
        assert before <= shown["generated_at"] <= after
        assert shown == entry(mine, 2 * DOT, shown["generated_at"])
        response = await client.get(
            self.PATH, headers=tenant.r, params={"chain": "WestendAssetHub"}
        )
        [shown] = response.json()
        assert shown == entry(mine, 2 * DOT, shown["generated_at"], on="WestendAssetHub")

    async def test_an_unreachable_chain_is_503(self, client, chain, tenant):
        chain.unreachable = True
        response = await client.get(self.PATH, headers=tenant.r)
        assert (response.status_code, response.json()) == (503, UNREACHABLE)
