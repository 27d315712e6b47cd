"""Wallets the users hold: a challenge signed with the wallet's key links it (sr25519 or
ed25519), the receiving wallet, unlinking, and what a transfer may not do."""

import uuid

import pytest
from sqlalchemy import update
from substrateinterface import Keypair, KeypairType

from tessera.models import ProductItem, WalletChallenge
from tests import orm
from tests.factories import (
    challenge,
    create_product,
    create_user,
    issue_items,
    link,
    linked,
    row_counts,
    transfer_item,
)

SR25519 = Keypair.create_from_uri("//Tessera//sr", crypto_type=KeypairType.SR25519)
ED25519 = Keypair.create_from_seed("11" * 32, crypto_type=KeypairType.ED25519)


def held(user: dict) -> list[dict]:
    return [w for w in user["wallets"] if w["custody"] == "user-controlled"]


class TestLinking:
    @pytest.mark.parametrize("keypair", [SR25519, ED25519], ids=["sr25519", "ed25519"])
    async def test_a_signed_challenge_links_the_wallet(self, client, tenant, keypair):
        user = await create_user(client, tenant)
        issued = await challenge(client, tenant, user, keypair)
        assert keypair.ss58_address in issued["message"] and issued["expires_at"] > 0
        response = await link(client, tenant, user, keypair, issued["message"])
        assert response.status_code == 201, response.text
        answer = response.json()
        [custodial] = [w for w in answer["wallets"] if w["custody"] == "custodial"]
        [wallet] = held(answer)
        assert wallet["type"] == "Polkadot"
        assert (
            wallet["address"]
            == Keypair(
                public_key=keypair.public_key, crypto_type=keypair.crypto_type, ss58_format=42
            ).ss58_address
        )
        assert answer["receivingWalletId"] == custodial["id"]  # mints still go to custody
        profile = await client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
        assert len(profile.json()["wallets"]) == 2

    async def test_a_wallet_signature_of_the_wrapped_text_is_accepted(self, client, tenant):
        user = await create_user(client, tenant)
        issued = await challenge(client, tenant, user, SR25519)
        wrapped = b"<Bytes>" + issued["message"].encode() + b"</Bytes>"  # as Polkadot.js signs
        response = await link(client, tenant, user, SR25519, wrapped)
        assert response.status_code == 201, response.text

    async def test_refusals_link_nothing(self, client, database, tenant):
        user = await create_user(client, tenant)
        before = await row_counts(database)
        no_challenge = await link(client, tenant, user, SR25519, "anything")
        assert no_challenge.status_code == 409
        assert no_challenge.json()["message"].startswith("no challenge for this address")
        issued = await challenge(client, tenant, user, SR25519)
        wrong_key = await link(client, tenant, user, SR25519, issued["message"], signer=ED25519)
        assert (wrong_key.status_code, wrong_key.json()) == (
            409,
            {"message": "signature: not a signature of the challenge by this address"},
        )
        wrong_text = await link(client, tenant, user, SR25519, issued["message"] + ".")
        assert wrong_text.status_code == 409
        assert held((await link(client, tenant, user, SR25519, issued["message"])).json())
        reused = await link(client, tenant, user, SR25519, issued["message"])
        assert (reused.status_code, reused.json()) == (
            409,
            {"message": "this challenge was answered already: ask a new one"},
        )
        counts = await row_counts(database)
        assert counts["user_wallets"] == before["user_wallets"] + 1

    async def test_an_expired_challenge_is_refused(self, client, database, tenant):
        user = await create_user(client, tenant)
        issued = await challenge(client, tenant, user, SR25519)
        async with orm.session(database) as session:
            await session.execute(update(WalletChallenge).values(expires_at=1))
            await session.commit()
        response = await link(client, tenant, user, SR25519, issued["message"])
        assert (response.status_code, response.json()) == (
            409,
            {"message": "this challenge has expired: ask a new one"},
        )

    async def test_an_address_links_once_per_project(self, client, tenant, other):
        ada, bob = await create_user(client, tenant), await create_user(client, tenant)
        await linked(client, tenant, ada, SR25519)
        issued = await challenge(client, tenant, bob, SR25519)
        response = await link(client, tenant, bob, SR25519, issued["message"])
        assert (response.status_code, response.json()) == (
            409,
            {"message": "this address is already linked to a user of this project"},
        )
        theirs = await create_user(client, other)
        assert held(await linked(client, other, theirs, SR25519))  # another project may

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({"address": "not-an-address"}, "address: "),
            ({"address": SR25519.ss58_address[:-1] + "z"}, "address: "),
            ({"address": SR25519.ss58_address, "signature": "0x1234"}, "signature: "),
        ],
    )
    async def test_malformed_addresses_and_signatures_are_400(self, client, tenant, body, error):
        user = await create_user(client, tenant)
        response = await client.post(
            "/v1/users/wallets",
            headers=tenant.w,
            json={"id": user["id"], "signature": "0x" + "00" * 64} | body,
        )
        assert response.status_code == 400
        assert any(e.startswith(error) for e in response.json()["errors"]), response.json()

    async def test_another_projects_user_is_404(self, client, tenant, other):
        theirs = await create_user(client, other)
        response = await client.post(
            "/v1/users/wallets/challenge",
            headers=tenant.w,
            json={"id": theirs["id"], "address": SR25519.ss58_address},
        )
        assert (response.status_code, response.json()) == (404, {"message": "user not found"})


class TestReceivingAndUnlinking:
    async def test_choose_the_receiving_wallet_then_unlink_it(self, client, tenant):
        user = await create_user(client, tenant)
        [wallet] = held(await linked(client, tenant, user, SR25519))
        chosen = await client.post(
            "/v1/users/wallets/receiving",
            headers=tenant.w,
            json={"id": user["id"], "wallet_id": wallet["id"]},
        )
        assert chosen.status_code == 200 and chosen.json()["receivingWalletId"] == wallet["id"]
        gone = await client.delete(f"/v1/users/wallets/{wallet['id']}", headers=tenant.w)
        assert gone.status_code == 204
        profile = await client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
        assert [w["custody"] for w in profile.json()["wallets"]] == ["custodial"]

    async def test_refusals(self, client, database, tenant, other):
        user = await create_user(client, tenant)
        answer = await linked(client, tenant, user, SR25519)
        [custodial] = [w for w in answer["wallets"] if w["custody"] == "custodial"]
        [wallet] = held(answer)
        stay = await client.delete(f"/v1/users/wallets/{custodial['id']}", headers=tenant.w)
        assert (stay.status_code, stay.json()) == (
            409,
            {"message": "a custodial wallet cannot be unlinked"},
        )
        someone = await create_user(client, tenant)
        not_theirs = await client.post(
            "/v1/users/wallets/receiving",
            headers=tenant.w,
            json={"id": someone["id"], "wallet_id": wallet["id"]},
        )
        assert (not_theirs.status_code, not_theirs.json()) == (404, {"message": "wallet not found"})
        for path in (f"/v1/users/wallets/{wallet['id']}", f"/v1/users/wallets/{uuid.uuid4()}"):
            headers = other.w if wallet["id"] in path else tenant.w
            missing = await client.delete(path, headers=headers)
            assert (missing.status_code, missing.json()) == (404, {"message": "wallet not found"})
        # An NFT sits in the wallet (the worker records where it minted: tests/chain).
        product = await create_product(client, tenant, is_transferable=True)
        [item] = await issue_items(client, tenant, product["id"], user["id"])
        async with orm.session(database) as session:
            await session.execute(
                update(ProductItem)
                .where(ProductItem.id == uuid.UUID(item["id"]))
                .values(nft_wallet_id=uuid.UUID(wallet["id"]))
            )
            await session.commit()
        kept = await client.delete(f"/v1/users/wallets/{wallet['id']}", headers=tenant.w)
        assert kept.status_code == 409
        assert kept.json()["message"].endswith("it stays linked")
        before = await row_counts(database)
        moved = await transfer_item(client, tenant, product["id"], item["id"], user, someone)
        assert moved.status_code == 409
        assert "a wallet its owner holds" in moved.json()["message"]
        assert await row_counts(database) == before
