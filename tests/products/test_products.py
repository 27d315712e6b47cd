import uuid

import pytest

from tests.factories import create_event, create_order, create_product, create_user, product_body

PRODUCT_KEYS = {
    "id",
    "created_at",
    "updated_at",
    "type",
    "name",
    "event_id",
    "description",
    "price",
    "active",
    "is_claimable",
    "is_transferable",
    "stock",
    "redemption_quantity",
    "max_per_account",
    "min_rep_balance",
    "metadata_uri",
    "mint_nft",
    "chain",
    "max_items",
    "event",
    "nft",
}


class TestCreateProduct:
    async def test_needs_write(self, client, tenant):
        assert (await client.post("/v1/products", json=product_body())).status_code == 401
        assert (
            await client.post("/v1/products", headers=tenant.r, json=product_body())
        ).status_code == 403

    async def test_defaults(self, client, tenant):
        response = await client.post(
            "/v1/products", headers=tenant.w, json={"type": "perks", "name": "Voucher"}
        )
        assert response.status_code == 201
        product = response.json()
        assert set(product) == PRODUCT_KEYS
        assert {
            k: v for k, v in product.items() if k not in {"id", "created_at", "updated_at"}
        } == {
            "type": "perks",
            "name": "Voucher",
            "event_id": None,
            "description": None,
            "price": "0",
            "active": True,
            "is_claimable": False,
            "is_transferable": False,
            "stock": None,
            "redemption_quantity": 1,
            "max_per_account": None,
            "min_rep_balance": 0,
            "metadata_uri": None,
            "mint_nft": False,
            "chain": None,
            "max_items": None,
            "event": None,
            "nft": None,
        }

    async def test_with_event_and_every_field(self, client, tenant):
        event = await create_event(client, tenant)
        body = {
            "type": "presale",
            "name": "Early bird",
            "event_id": event["id"],
            "description": "Cheap",
            "price": "49.99",
            "active": False,
            "is_claimable": True,
            "is_transferable": True,
            "stock": 10,
            "redemption_quantity": 3,
            "max_per_account": 2,
            "min_rep_balance": 5,
            "metadata_uri": "ipfs://bafy/meta.json",
            "mint_nft": False,
            "chain": "AssetHub",
            "max_items": 10,
        }
        response = await client.post("/v1/products", headers=tenant.w, json=body)
        assert response.status_code == 201
        product = response.json()
        assert {k: product[k] for k in body} == body and product["event"] == event
        assert (
            await client.get(f"/v1/products/{product['id']}", headers=tenant.r)
        ).json() == product

    async def test_blank_event_id_means_a_general_product(self, client, tenant):
        product = await create_product(client, tenant, event_id="")
        assert product["event_id"] is None and product["event"] is None

    @pytest.mark.parametrize(
        ("override", "error"),
        [
            ({"type": "ticket"}, "type: Input should be 'admission', 'presale' or 'perks'"),
            ({"name": ""}, "name: String should have at least 1 character"),
            ({"name": "x" * 256}, "name: String should have at most 255 characters"),
            ({"description": ""}, "description: String should have at least 1 character"),
            ({"description": "x" * 256}, "description: String should have at most 255 characters"),
            ({"price": "12.345"}, "price: String should match pattern"),
            ({"price": 12}, "price: Input should be a valid string"),
            ({"price": "-1"}, "price: String should match pattern"),
            ({"stock": 0}, "stock: Input should be greater than or equal to 1"),
            (
                {"redemption_quantity": 0},
                "redemption_quantity: Input should be greater than or equal to 1",
            ),
            ({"max_per_account": 0}, "max_per_account: Input should be greater than or equal to 1"),
            ({"max_items": 0}, "max_items: Input should be greater than or equal to 1"),
            (
                {"min_rep_balance": -1},
                "min_rep_balance: Input should be greater than or equal to 0",
            ),
            ({"stock": 1.5}, "stock: Input should be a valid integer"),
            ({"active": "yes"}, "active: Input should be a valid boolean"),
            (
                {"metadata_uri": "https://x/" + "a" * 503},
                "metadata_uri: String should have at most 512 characters",
            ),
            ({"metadata_uri": "not a uri"}, "metadata_uri: String should match pattern"),
            ({"chain": "Ethereum"}, "chain: Input should be 'AssetHub' or 'WestendAssetHub'"),
            ({"event_id": "not-a-uuid"}, "event_id: Input should be a valid UUID"),
        ],
    )
    async def test_bounds_are_400(self, client, tenant, override, error):
        response = await client.post(
            "/v1/products", headers=tenant.w, json=product_body(**override)
        )
        assert response.status_code == 400
        assert any(e.startswith(error) for e in response.json()["errors"]), response.json()

    async def test_upper_bounds_are_accepted(self, client, tenant):
        product = await create_product(
            client,
            tenant,
            name="x" * 255,
            description="y" * 255,
            metadata_uri="https://x/" + "a" * 502,
            min_rep_balance=0,
        )
        assert len(product["metadata_uri"]) == 512

    async def test_mint_nft_needs_metadata_uri_and_chain(self, client, tenant):
        response = await client.post(
            "/v1/products", headers=tenant.w, json=product_body(mint_nft=True)
        )
        assert response.status_code == 400
        assert response.json() == {
            "errors": [
                "metadata_uri: required when mint_nft is true",
                "chain: required when mint_nft is true",
            ]
        }

    async def test_mint_nft_on_an_unconfigured_chain_is_409(self, client, tenant):
        body = product_body(mint_nft=True, metadata_uri="https://m/1.json", chain="AssetHub")
        response = await client.post("/v1/products", headers=tenant.w, json=body)
        assert response.status_code == 409
        assert response.json() == {
            "message": "chain AssetHub is not configured: set TESSERA_CHAIN_ASSETHUB_RPC_URL"
        }
        assert (await client.get("/v1/products", headers=tenant.r)).json() == []

    async def test_mint_nft_on_an_unreachable_chain_is_503_and_records_nothing(
        self, client, tenant
    ):
        body = product_body(mint_nft=True, metadata_uri="https://m/1.json", chain="WestendAssetHub")
        response = await client.post("/v1/products", headers=tenant.w, json=body)
        assert response.status_code == 503
        assert response.json()["message"].startswith("chain WestendAssetHub is unavailable")
        assert (await client.get("/v1/products", headers=tenant.r)).json() == []

    async def test_another_projects_event_is_404(self, client, tenant, other):
        theirs = await create_event(client, other)
        response = await client.post(
            "/v1/products", headers=tenant.w, json=product_body(event_id=theirs["id"])
        )
        assert response.status_code == 404 and response.json() == {"message": "event not found"}


class TestListAndGetProducts:
    async def test_needs_a_credential(self, client, tenant):
        product = await create_product(client, tenant)
        assert (await client.get("/v1/products")).status_code == 401
        assert (await client.get(f"/v1/products/{product['id']}")).status_code == 401

    async def test_lists_oldest_first_with_pages(self, client, tenant, other):
        products = [await create_product(client, tenant) for _ in range(5)]
        await create_product(client, other)
        response = await client.get(
            "/v1/products", headers=tenant.r, params={"page": 2, "limit": 2}
        )
        assert response.status_code == 200 and response.json() == products[2:4]
        assert (await client.get("/v1/products", headers=tenant.r)).json() == products
        empty = await client.get("/v1/products", headers=tenant.r, params={"page": 4, "limit": 2})
        assert empty.json() == []

    @pytest.mark.parametrize(
        ("params", "error"),
        [
            ({"page": 0}, "page: Input should be greater than or equal to 1"),
            ({"limit": 0}, "limit: Input should be greater than or equal to 1"),
            ({"limit": 101}, "limit: Input should be less than or equal to 100"),
        ],
    )
    async def test_list_bounds_are_400(self, client, tenant, params, error):
        response = await client.get("/v1/products", headers=tenant.r, params=params)
        assert response.status_code == 400 and response.json() == {"errors": [error]}

    async def test_another_projects_product_is_404(self, client, tenant, other):
        theirs = await create_product(client, other)
        response = await client.get(f"/v1/products/{theirs['id']}", headers=tenant.r)
        assert response.status_code == 404 and response.json() == {"message": "product not found"}
        response = await client.get("/v1/products/not-a-uuid", headers=tenant.r)
        assert response.status_code == 400 and response.json()["errors"][0].startswith("id: ")


class TestSales:
    async def test_needs_a_credential(self, client, tenant):
        product = await create_product(client, tenant)
        assert (await client.get(f"/v1/products/{product['id']}/sales")).status_code == 401

    async def test_lists_order_lines_with_status_and_price_at_order_time(self, client, tenant, app):
        product = await create_product(client, tenant, price="10.50")
        other_product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        first = (await create_order(client, tenant, user["id"], (product["id"], 2))).json()
        second = (
            await create_order(
                client,
                tenant,
                user["id"],
                (product["id"], 1),
                (other_product["id"], 1),
                status="pending",
                order_number="WEB-2",
            )
        ).json()
        response = await client.get(f"/v1/products/{product['id']}/sales", headers=tenant.r)
        assert response.status_code == 200
        common = {
            "product_name": product["name"],
            "unit_price": 10.5,
            "user_id": user["id"],
            "user_email": user["email"],
            "user_first_name": user["firstName"],
            "user_last_name": user["lastName"],
        }
        sales = response.json()["sales"]
        assert [{k: v for k, v in s.items() if k != "created_at"} for s in sales] == [
            {
                "id": first["items"][0]["id"],
                "order_number": first["order_number"],
                "order_status": "completed",
                "quantity": 2,
            }
            | common,
            {
                "id": second["items"][0]["id"],
                "order_number": "WEB-2",
                "order_status": "pending",
                "quantity": 1,
            }
            | common,
        ]
        assert response.json()["pagination"] == {"page": 1, "limit": 20, "total": 2}
        paged = await client.get(
            f"/v1/products/{product['id']}/sales", headers=tenant.r, params={"page": 2, "limit": 1}
        )
        assert [s["order_number"] for s in paged.json()["sales"]] == ["WEB-2"]
        assert paged.json()["pagination"] == {"page": 2, "limit": 1, "total": 2}
        # Past the last sale: no sale, and still the number of sales.
        past = await client.get(
            f"/v1/products/{product['id']}/sales", headers=tenant.r, params={"page": 3, "limit": 1}
        )
        assert past.json() == {"sales": [], "pagination": {"page": 3, "limit": 1, "total": 2}}
        other = await client.get(f"/v1/products/{other_product['id']}/sales", headers=tenant.r)
        assert [s["order_number"] for s in other.json()["sales"]] == ["WEB-2"]
        assert other.json()["pagination"]["total"] == 1
        never_sold = await create_product(client, tenant)
        unsold = await client.get(f"/v1/products/{never_sold['id']}/sales", headers=tenant.r)
        assert unsold.json() == {"sales": [], "pagination": {"page": 1, "limit": 20, "total": 0}}

    @pytest.mark.parametrize("params", [{"page": 0}, {"limit": 0}, {"limit": 101}])
    async def test_bounds_are_400(self, client, tenant, params):
        product = await create_product(client, tenant)
        response = await client.get(
            f"/v1/products/{product['id']}/sales", headers=tenant.r, params=params
        )
        assert response.status_code == 400 and len(response.json()["errors"]) == 1

    async def test_another_projects_product_is_404(self, client, tenant, other):
        theirs = await create_product(client, other)
        buyer = await create_user(client, other)
        sold = await create_order(client, other, buyer["id"], (theirs["id"], 1))
        assert sold.status_code == 201
        response = await client.get(f"/v1/products/{theirs['id']}/sales", headers=tenant.r)
        assert response.status_code == 404
        response = await client.get(f"/v1/products/{uuid.uuid4()}/sales", headers=tenant.r)
        assert response.status_code == 404


class TestHungChain:
    async def test_a_chain_that_never_answers_is_a_503_within_the_request_deadline(
        self, settings, tenant
    ):
        import socket
        import time

        import httpx

        from tessera.main import create_app

        with socket.socket() as silent:  # accepts connections, never speaks
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            app = create_app(
                settings.model_copy(
                    update={
                        "chain_assethub_rpc_url": f"ws://127.0.0.1:{silent.getsockname()[1]}",
                        "chain_timeout_seconds": 30.0,
                        "chain_request_timeout_seconds": 1.0,
                    }
                )
            )
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                    body = product_body(
                        mint_nft=True, metadata_uri="https://m/1.json", chain="AssetHub"
                    )
                    started = time.monotonic()
                    response = await client.post("/v1/products", headers=tenant.w, json=body)
                    assert time.monotonic() - started < 5
                    assert response.status_code == 503
                    assert response.json() == {"message": "chain AssetHub is unavailable: timeout"}
                    assert (await client.get("/v1/products", headers=tenant.r)).json() == []
