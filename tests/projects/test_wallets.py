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
        }
        assert (wallet["type"], wallet["custody"]) == ("Polkadot", "custodial")
        assert wallet["project_id"] == str(tenant.project_id)
        assert len(bytes.fromhex(ss58_decode(wallet["address"], valid_ss58_format=42))) == 32
        [theirs] = (await client.get("/v1/projects/wallets", headers=other.r)).json()
        assert theirs["address"] != wallet["address"]
