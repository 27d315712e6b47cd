from scalecodec.utils.ss58 import ss58_decode


class TestProjectWallets:
    async def test_needs_a_credential(self, client, tenant):
        response = await client.get("/v1/projects/wallets")
        assert response.status_code == 401 and set(response.json()) == {"message"}

    async def test_lists_only_the_projects_wallets(self, client, tenant, other):
        response = await client.get("/v1/projects/wallets", headers=tenant.r)
        assert response.status_code == 200
        [wallet] = response.json()
        assert set(wallet) == {
            "id",
            "created_at",
            "updated_at",
            "address",
            "type",
            "custody",
            "project_id",
            "addresses",
        }
        # Only WestendAssetHub is configured in these tests (prefix 42, like the default address).
        assert wallet["addresses"] == {"WestendAssetHub": wallet["address"]}
        assert (wallet["type"], wallet["custody"]) == ("Polkadot", "custodial")
        assert wallet["project_id"] == str(tenant.project_id)
        assert len(bytes.fromhex(ss58_decode(wallet["address"], valid_ss58_format=42))) == 32
        [theirs] = (await client.get("/v1/projects/wallets", headers=other.r)).json()
        assert theirs["address"] != wallet["address"]

    async def test_balances_of_an_unconfigured_or_unreachable_chain(self, client, tenant):
        response = await client.get(
            "/v1/projects/wallets/balances", headers=tenant.r, params={"chain": "AssetHub"}
        )
        assert response.status_code == 409
        assert response.json() == {
            "message": "chain AssetHub is not configured: set TESSERA_CHAIN_ASSETHUB_RPC_URL"
        }
        response = await client.get("/v1/projects/wallets/balances", headers=tenant.r)
        assert response.status_code == 503
        response = await client.get(
            "/v1/projects/wallets/balances", headers=tenant.r, params={"chain": "Ethereum"}
        )
        assert response.status_code == 400 and response.json()["errors"][0].startswith("chain:")
