import time

import pytest
from sqlalchemy import select, update

from tessera.models import ItemTransfer, Product
from tests import orm
from tests.factories import create_product, create_users, issue_items
from tests.products.test_items import owner


async def _setup(client, tenant, **product):
    created = await create_product(client, tenant, is_transferable=True, **product)
    sender, recipient = await create_users(client, tenant, 2)
    [item] = await issue_items(client, tenant, created["id"], sender["id"])
    return created, item, sender, recipient


def _body(item, sender, recipient, by="id"):
    if by == "email":
        return {
            "product_item_id": item["id"],
            "sender_email": sender["email"],
            "recipient_email": recipient["email"],
        }
    return {
        "product_item_id": item["id"],
        "sender_user_id": sender["id"],
        "recipient_user_id": recipient["id"],
    }


class TestTransfer:
    async def test_needs_write(self, client, tenant):
        product, item, sender, recipient = await _setup(client, tenant)
        path = f"/v1/products/{product['id']}/transfer"
        assert (await client.post(path, json=_body(item, sender, recipient))).status_code == 401
        response = await client.post(path, headers=tenant.r, json=_body(item, sender, recipient))
        assert response.status_code == 403

    @pytest.mark.parametrize("by", ["id", "email"])
    async def test_moves_the_item_and_keeps_history(self, client, tenant, database, by):
        product, item, sender, recipient = await _setup(client, tenant, redemption_quantity=2)
        before = int(time.time())
        response = await client.post(
            f"/v1/products/{product['id']}/transfer",
            headers=tenant.w,
            json=_body(item, sender, recipient, by),
        )
        assert response.status_code == 200
        body = response.json()
        assert before <= body["transferred_at"] <= int(time.time()) + 1
        assert body == {
            "product_item": {
                "id": item["id"],
                "item_id": 1,
                "product_id": product["id"],
                "product_name": product["name"],
                "product_type": product["type"],
                "redemption_count": 0,
                "redemption_quantity": 2,
                "is_fully_redeemed": False,
                "redeemed_at": None,
            },
            "previous_owner": owner(sender),
            "new_owner": owner(recipient),
            "transferred_at": body["transferred_at"],
        }
        async with orm.session(database, write=False) as session:
            history = list(await session.scalars(select(ItemTransfer)))
        assert [(str(h.from_user_id), str(h.to_user_id), h.transferred_at) for h in history] == [
            (sender["id"], recipient["id"], body["transferred_at"])
        ]
        back = await client.post(
            f"/v1/products/{product['id']}/transfer",
            headers=tenant.w,
            json=_body(item, sender, recipient),
        )
        assert back.status_code == 409 and back.json() == {
            "message": "the sender does not own this product item"
        }

    async def test_conflicts(self, client, tenant):
        product, item, sender, recipient = await _setup(client, tenant)
        path = f"/v1/products/{product['id']}/transfer"

        locked = await create_product(client, tenant)
        [locked_item] = await issue_items(client, tenant, locked["id"], sender["id"])
        response = await client.post(
            f"/v1/products/{locked['id']}/transfer",
            headers=tenant.w,
            json=_body(locked_item, sender, recipient),
        )
        assert (response.status_code, response.json()) == (
            409,
            {"message": "product items of this product are not transferable"},
        )
        response = await client.post(path, headers=tenant.w, json=_body(item, recipient, sender))
        assert response.json() == {"message": "the sender does not own this product item"}
        response = await client.post(path, headers=tenant.w, json=_body(item, sender, sender))
        assert response.json() == {"message": "the recipient must be another user than the sender"}
        await client.post(
            f"/v1/products/{product['id']}/items/redeem",
            headers=tenant.w,
            json={"product_item_id": item["id"]},
        )
        response = await client.post(path, headers=tenant.w, json=_body(item, sender, recipient))
        assert (response.status_code, response.json()) == (
            409,
            {"message": "product item is fully redeemed"},
        )

    async def test_recipient_max_per_account_is_checked(self, client, tenant):
        created, item, sender, recipient = await _setup(client, tenant, max_per_account=1)
        await issue_items(client, tenant, created["id"], recipient["id"])
        response = await client.post(
            f"/v1/products/{created['id']}/transfer",
            headers=tenant.w,
            json=_body(item, sender, recipient),
        )
        assert response.status_code == 409
        assert response.json() == {
            "message": f"max_per_account is 1: {recipient['email']} holds 1 and would hold 2"
        }

    async def test_recipient_reputation_is_checked(self, client, tenant):
        created = await create_product(client, tenant, is_transferable=True, min_rep_balance=1)
        sender, recipient = await create_users(client, tenant, 2)
        await client.post(
            "/v1/users/reputation",
            headers=tenant.w,
            json={"id": sender["id"], "delta": 1, "reason": "x"},
        )
        [item] = await issue_items(client, tenant, created["id"], sender["id"])
        response = await client.post(
            f"/v1/products/{created['id']}/transfer",
            headers=tenant.w,
            json=_body(item, sender, recipient),
        )
        assert response.status_code == 409
        assert response.json() == {"message": f"min_rep_balance is 1: {recipient['email']} has 0"}

    async def test_inactive_product_cannot_be_transferred_in(self, client, tenant, database):
        created, item, sender, recipient = await _setup(client, tenant)
        async with orm.session(database) as session:
            await session.execute(update(Product).values(active=False))
            await session.commit()
        response = await client.post(
            f"/v1/products/{created['id']}/transfer",
            headers=tenant.w,
            json=_body(item, sender, recipient),
        )
        assert (response.status_code, response.json()) == (
            409,
            {"message": "product is not active"},
        )

    async def test_other_projects_are_404(self, client, tenant, other):
        product, item, sender, recipient = await _setup(client, tenant)
        their_product, their_item, their_sender, their_recipient = await _setup(client, other)
        path = f"/v1/products/{product['id']}/transfer"
        cases = [
            (
                f"/v1/products/{their_product['id']}/transfer",
                _body(their_item, their_sender, their_recipient),
                "product not found",
            ),
            (path, _body(their_item, sender, recipient), "product item not found"),
            (path, _body(item, their_sender, recipient), "sender not found"),
            (path, _body(item, sender, their_recipient), "recipient not found"),
        ]
        for url, body, message in cases:
            response = await client.post(url, headers=tenant.w, json=body)
            assert (response.status_code, response.json()) == (404, {"message": message})

    @pytest.mark.parametrize(
        ("drop", "error"),
        [
            ("product_item_id", "product_item_id: field required"),
            ("sender_user_id", "one of sender_email or sender_user_id is required"),
            ("recipient_user_id", "one of recipient_email or recipient_user_id is required"),
        ],
    )
    async def test_missing_parties_are_400(self, client, tenant, drop, error):
        product, item, sender, recipient = await _setup(client, tenant)
        body = _body(item, sender, recipient)
        del body[drop]
        response = await client.post(
            f"/v1/products/{product['id']}/transfer", headers=tenant.w, json=body
        )
        assert response.status_code == 400 and response.json() == {"errors": [error]}

    async def test_invalid_ids_are_400(self, client, tenant):
        product, item, sender, recipient = await _setup(client, tenant)
        body = _body(item, sender, recipient) | {"recipient_user_id": "nope"}
        response = await client.post(
            f"/v1/products/{product['id']}/transfer", headers=tenant.w, json=body
        )
        assert response.status_code == 400
        assert response.json()["errors"][0].startswith(
            "recipient_user_id: Input should be a valid UUID"
        )
