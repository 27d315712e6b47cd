"""The endpoints of the wallets users hold (``tessera.wallets``), one class each: the challenge,
the link, the receiving wallet and the unlink; who may call them, another project's users and
wallets (404), each rule of ``wallets.service``, and the answers whole. (tests/users/
test_wallets.py has both kinds of key and the malformed input.)"""

import re
import time
import uuid

import pytest
from scalecodec.utils.ss58 import ss58_encode
from sqlalchemy import select, update
from substrateinterface import Keypair, KeypairType

from tessera.models import ProductItem, User, UserWallet, WalletChallenge
from tests import orm
from tests.factories import (
    challenge,
    create_product,
    create_user,
    door_key,
    issue_items,
    link,
    linked,
    row_counts,
)

NO_CREDENTIAL = {
    "message": "credential required: send an x-api-key header or an Authorization: Bearer token"
}
READ_ONLY = {"message": "this credential is read-only; a write credential is required"}
DOOR_ONLY = {
    "message": "this is a check-in key: it may scan tickets, annul and upload scans and read "
    "the sync, nothing else"
}
USER_NOT_FOUND = {"message": "user not found"}
WALLET_NOT_FOUND = {"message": "wallet not found"}
NOT_SIGNED = {"message": "signature: not a signature of the challenge by this address"}
NO_CHALLENGE = {
    "message": "no challenge for this address: ask POST /v1/users/wallets/challenge first"
}
ANSWERED = {"message": "this challenge was answered already: ask a new one"}
FIXED = Keypair.create_from_uri("//Tessera//wallets", crypto_type=KeypairType.SR25519)
USER_KEYS = {
    "id",
    "isActivated",
    "activatedOn",
    "firstName",
    "lastName",
    "email",
    "referenceId",
    "wallets",
    "receivingWalletId",
}


def keypair(kind: KeypairType = KeypairType.SR25519) -> Keypair:
    if kind == KeypairType.ED25519:
        return Keypair.create_from_seed(uuid.uuid4().hex * 2, crypto_type=kind)
    return Keypair.create_from_uri(f"//{uuid.uuid4().hex}", crypto_type=kind)


def on_network(pair: Keypair, prefix: int) -> str:
    """The keypair's address as a network of ``prefix`` writes it."""
    return ss58_encode(pair.public_key, ss58_format=prefix)


def custodial_of(user: dict) -> dict:
    [wallet] = [w for w in user["wallets"] if w["custody"] == "custodial"]
    return wallet


def held(user: dict) -> list[dict]:
    return [w for w in user["wallets"] if w["custody"] == "user-controlled"]


def signed(pair: Keypair, message: str) -> str:
    return "0x" + pair.sign(message.encode()).hex()


async def challenges(database) -> list[WalletChallenge]:
    async with orm.session(database, write=False) as session:
        return list(
            await session.scalars(select(WalletChallenge).order_by(WalletChallenge.created_at))
        )


async def receiving_of(database, user: dict) -> uuid.UUID | None:
    """The wallet the user chose (None: the first custodial one, by default)."""
    async with orm.session(database, write=False) as session:
        return await session.scalar(
            select(User.receiving_wallet_id).where(User.id == uuid.UUID(user["id"]))
        )


class TestChallenge:
    PATH = "/v1/users/wallets/challenge"

    async def test_needs_a_write_credential(self, app, client, tenant):
        user = await create_user(client, tenant)
        body = {"id": user["id"], "address": keypair().ss58_address}
        response = await client.post(self.PATH, json=body)
        assert (response.status_code, response.json()) == (401, NO_CREDENTIAL)
        response = await client.post(self.PATH, headers=tenant.r, json=body)
        assert (response.status_code, response.json()) == (403, READ_ONLY)
        response = await client.post(self.PATH, headers=await door_key(app, tenant), json=body)
        assert (response.status_code, response.json()) == (403, DOOR_ONLY)

    async def test_another_projects_or_an_unknown_user_is_404_and_asks_nothing(
        self, client, database, tenant, other
    ):
        theirs = await create_user(client, other)
        address = keypair().ss58_address
        for body in (
            {"id": theirs["id"]},
            {"email": theirs["email"]},
            {"referenceId": theirs["referenceId"]},
            {"id": str(uuid.uuid4())},
        ):
            response = await client.post(
                self.PATH, headers=tenant.w, json=body | {"address": address}
            )
            assert (response.status_code, response.json()) == (404, USER_NOT_FOUND), body
        assert await challenges(database) == []

    @pytest.mark.parametrize(
        ("shape", "error"),
        [
            (lambda user, address: {"address": address}, "one of email, referenceId or id"),
            (lambda user, address: {"id": "nope", "address": address}, "id: "),
            (lambda user, address: {"id": user, "address": "not-an-address"}, "address: "),
            (lambda user, address: {"id": user, "address": address[:-1] + "z"}, "address: "),
            (lambda user, address: {"id": user}, "address: "),
        ],
        ids=["no-user", "bad-id", "bad-address", "bad-checksum", "no-address"],
    )
    async def test_bad_input_is_400_and_asks_nothing(self, client, database, tenant, shape, error):
        user = await create_user(client, tenant)
        body = shape(user["id"], FIXED.ss58_address)
        response = await client.post(self.PATH, headers=tenant.w, json=body)
        assert response.status_code == 400, response.text
        assert any(error in e for e in response.json()["errors"]), response.json()
        assert await challenges(database) == []

    async def test_a_message_naming_the_address_and_the_user_valid_for_five_minutes(
        self, client, database, tenant
    ):
        user = await create_user(client, tenant)
        pair = keypair()
        before = int(time.time())
        response = await client.post(
            self.PATH, headers=tenant.w, json={"email": user["email"], "address": pair.ss58_address}
        )
        after = int(time.time())
        assert response.status_code == 201, response.text
        answer = response.json()
        assert set(answer) == {"message", "expires_at"}
        assert before + 300 <= answer["expires_at"] <= after + 300
        assert re.fullmatch(
            rf"Link the wallet {pair.ss58_address} to user {user['id']} on Tessera\. "
            rf"Nonce [0-9a-f]{{32}}\. Valid until {answer['expires_at']}\.",
            answer["message"],
        )
        [stored] = await challenges(database)
        assert (stored.user_id, stored.public_key, stored.message, stored.expires_at) == (
            uuid.UUID(user["id"]),
            pair.public_key,
            answer["message"],
            answer["expires_at"],
        )
        assert stored.used_at is None

    async def test_each_challenge_has_a_nonce_of_its_own(self, client, tenant):
        user = await create_user(client, tenant)
        pair = keypair()
        first = await challenge(client, tenant, user, pair)
        second = await challenge(client, tenant, user, pair)
        assert first["message"] != second["message"]


class TestLink:
    PATH = "/v1/users/wallets"

    async def test_needs_a_write_credential_and_links_nothing(self, client, database, tenant):
        user = await create_user(client, tenant)
        pair = keypair()
        issued = await challenge(client, tenant, user, pair)
        body = {"id": user["id"], "address": pair.ss58_address}
        body["signature"] = signed(pair, issued["message"])
        before = await row_counts(database)
        response = await client.post(self.PATH, json=body)
        assert (response.status_code, response.json()) == (401, NO_CREDENTIAL)
        response = await client.post(self.PATH, headers=tenant.r, json=body)
        assert (response.status_code, response.json()) == (403, READ_ONLY)
        assert await row_counts(database) == before
        assert (await client.post(self.PATH, headers=tenant.w, json=body)).status_code == 201

    async def test_the_user_with_all_its_wallets(self, client, database, tenant):
        user = await create_user(client, tenant)
        pair = keypair(KeypairType.ED25519)
        issued = await challenge(client, tenant, user, pair)
        response = await link(client, tenant, user, pair, issued["message"])
        assert response.status_code == 201, response.text
        answer = response.json()
        assert set(answer) == USER_KEYS
        [wallet] = held(answer)
        custodial = custodial_of(user)
        assert answer == {
            "id": user["id"],
            "isActivated": user["isActivated"],
            "activatedOn": user["activatedOn"],
            "firstName": user["firstName"],
            "lastName": user["lastName"],
            "email": user["email"],
            "referenceId": user["referenceId"],
            "wallets": [
                custodial,
                {
                    "id": wallet["id"],
                    "type": "Polkadot",
                    "address": pair.ss58_address,
                    "custody": "user-controlled",
                },
            ],
            "receivingWalletId": custodial["id"],
        }
        [stored] = await challenges(database)
        assert stored.used_at is not None
        async with orm.session(database, write=False) as session:
            row = await session.get(UserWallet, uuid.UUID(wallet["id"]))
        assert (row.public_key, row.secret_key_id, row.secret_blob) == (pair.public_key, None, None)

    async def test_the_address_of_any_network_links_the_key_shown_in_the_projects(
        self, client, tenant
    ):
        user = await create_user(client, tenant)
        pair = keypair()
        polkadot = on_network(pair, 0)
        assert polkadot != pair.ss58_address
        response = await client.post(
            "/v1/users/wallets/challenge",
            headers=tenant.w,
            json={"id": user["id"], "address": pair.ss58_address},
        )
        issued = response.json()
        response = await client.post(
            self.PATH,
            headers=tenant.w,
            json={
                "id": user["id"],
                "address": polkadot,
                "signature": signed(pair, issued["message"]),
            },
        )
        assert response.status_code == 201, response.text
        assert [w["address"] for w in held(response.json())] == [pair.ss58_address]

    @pytest.mark.parametrize("prefix", [2, 63])
    async def test_an_address_of_a_one_byte_prefix_network_links(self, client, tenant, prefix):
        user = await create_user(client, tenant)
        pair = keypair()
        address = on_network(pair, prefix)
        issued = await client.post(
            "/v1/users/wallets/challenge",
            headers=tenant.w,
            json={"id": user["id"], "address": address},
        )
        assert issued.status_code == 201, issued.text
        response = await client.post(
            self.PATH,
            headers=tenant.w,
            json={
                "id": user["id"],
                "address": address,
                "signature": signed(pair, issued.json()["message"]),
            },
        )
        assert response.status_code == 201, response.text
        assert [w["address"] for w in held(response.json())] == [pair.ss58_address]

    @pytest.mark.parametrize("prefix", [64, 2032, 16383])
    async def test_an_address_of_a_two_byte_prefix_network_links(self, client, tenant, prefix):
        """An SS58 address of any network, the field says; the settings allow prefixes up to
        16383, so Tessera itself may show such addresses (49 characters)."""
        user = await create_user(client, tenant)
        pair = keypair()
        address = on_network(pair, prefix)
        assert len(address) == 49
        issued = await client.post(
            "/v1/users/wallets/challenge",
            headers=tenant.w,
            json={"id": user["id"], "address": address},
        )
        assert issued.status_code == 201, issued.text
        response = await client.post(
            self.PATH,
            headers=tenant.w,
            json={
                "id": user["id"],
                "address": address,
                "signature": signed(pair, issued.json()["message"]),
            },
        )
        assert response.status_code == 201, response.text
        assert [w["address"] for w in held(response.json())] == [pair.ss58_address]

    async def test_only_the_latest_challenge_of_the_address_counts(self, client, database, tenant):
        user = await create_user(client, tenant)
        pair = keypair()
        older = await challenge(client, tenant, user, pair)
        newer = await challenge(client, tenant, user, pair)
        response = await link(client, tenant, user, pair, older["message"])
        assert (response.status_code, response.json()) == (409, NOT_SIGNED)
        response = await link(client, tenant, user, pair, newer["message"])
        assert response.status_code == 201, response.text
        used = {c.message: c.used_at is not None for c in await challenges(database)}
        assert used == {older["message"]: False, newer["message"]: True}

    async def test_a_challenge_is_the_users_and_the_addresss_own(self, client, database, tenant):
        ada, bob = await create_user(client, tenant), await create_user(client, tenant)
        pair, another = keypair(), keypair()
        issued = await challenge(client, tenant, ada, pair)
        before = await row_counts(database)
        for user, address in ((bob, pair), (ada, another)):
            response = await client.post(
                self.PATH,
                headers=tenant.w,
                json={
                    "id": user["id"],
                    "address": address.ss58_address,
                    "signature": signed(address, issued["message"]),
                },
            )
            assert (response.status_code, response.json()) == (409, NO_CHALLENGE)
        assert await row_counts(database) == before

    async def test_a_wrong_signature_leaves_the_challenge_usable_once(
        self, client, database, tenant
    ):
        user = await create_user(client, tenant)
        pair = keypair()
        issued = await challenge(client, tenant, user, pair)
        before = await row_counts(database)
        wrong = await link(client, tenant, user, pair, issued["message"], signer=keypair())
        assert (wrong.status_code, wrong.json()) == (409, NOT_SIGNED)
        assert await row_counts(database) == before
        [stored] = await challenges(database)
        assert stored.used_at is None
        assert (await link(client, tenant, user, pair, issued["message"])).status_code == 201
        again = await link(client, tenant, user, pair, issued["message"])
        assert (again.status_code, again.json()) == (409, ANSWERED)

    async def test_another_projects_user_is_404(self, client, database, tenant, other):
        theirs = await create_user(client, other)
        pair = keypair()
        issued = await challenge(client, other, theirs, pair)
        response = await link(client, tenant, theirs, pair, issued["message"])
        assert (response.status_code, response.json()) == (404, USER_NOT_FOUND)
        [stored] = await challenges(database)
        assert stored.used_at is None  # theirs to answer still
        assert (await link(client, other, theirs, pair, issued["message"])).status_code == 201

    async def test_an_unlinked_address_links_again_with_a_new_challenge(self, client, tenant):
        user = await create_user(client, tenant)
        pair = keypair()
        issued = await challenge(client, tenant, user, pair)
        first = await link(client, tenant, user, pair, issued["message"])
        [wallet] = held(first.json())
        gone = await client.delete(f"/v1/users/wallets/{wallet['id']}", headers=tenant.w)
        assert gone.status_code == 204
        stale = await link(client, tenant, user, pair, issued["message"])
        assert (stale.status_code, stale.json()) == (409, ANSWERED)
        answer = await linked(client, tenant, user, pair)
        [again] = held(answer)
        assert again["address"] == pair.ss58_address and again["id"] != wallet["id"]


class TestReceiving:
    PATH = "/v1/users/wallets/receiving"

    async def test_needs_a_write_credential(self, client, database, tenant):
        user = await create_user(client, tenant)
        [wallet] = held(await linked(client, tenant, user, keypair()))
        body = {"id": user["id"], "wallet_id": wallet["id"]}
        response = await client.post(self.PATH, json=body)
        assert (response.status_code, response.json()) == (401, NO_CREDENTIAL)
        response = await client.post(self.PATH, headers=tenant.r, json=body)
        assert (response.status_code, response.json()) == (403, READ_ONLY)
        assert await receiving_of(database, user) is None

    async def test_choose_a_held_wallet_then_the_custodial_one_again(
        self, client, database, tenant
    ):
        user = await create_user(client, tenant)
        answer = await linked(client, tenant, user, keypair())
        [wallet], custodial = held(answer), custodial_of(answer)
        chosen = await client.post(
            self.PATH, headers=tenant.w, json={"id": user["id"], "wallet_id": wallet["id"]}
        )
        assert (chosen.status_code, chosen.json()) == (
            200,
            answer | {"receivingWalletId": wallet["id"]},
        )
        assert await receiving_of(database, user) == uuid.UUID(wallet["id"])
        back = await client.post(
            self.PATH,
            headers=tenant.w,
            json={"email": user["email"], "wallet_id": custodial["id"]},
        )
        assert (back.status_code, back.json()) == (
            200,
            answer | {"receivingWalletId": custodial["id"]},
        )
        assert await receiving_of(database, user) == uuid.UUID(custodial["id"])

    async def test_another_users_or_projects_or_no_wallet_is_404_and_chooses_nothing(
        self, client, database, tenant, other
    ):
        ada, bob = await create_user(client, tenant), await create_user(client, tenant)
        [bobs] = held(await linked(client, tenant, bob, keypair()))
        theirs = await create_user(client, other)
        [their_wallet] = held(await linked(client, other, theirs, keypair()))
        for wallet_id in (bobs["id"], custodial_of(bob)["id"], their_wallet["id"], uuid.uuid4()):
            response = await client.post(
                self.PATH, headers=tenant.w, json={"id": ada["id"], "wallet_id": str(wallet_id)}
            )
            assert (response.status_code, response.json()) == (404, WALLET_NOT_FOUND)
        # Their user, with their own wallet, from this project: the user is not found first.
        response = await client.post(
            self.PATH,
            headers=tenant.w,
            json={"id": theirs["id"], "wallet_id": their_wallet["id"]},
        )
        assert (response.status_code, response.json()) == (404, USER_NOT_FOUND)
        for user in (ada, bob, theirs):
            assert await receiving_of(database, user) is None

    async def test_a_malformed_wallet_id_is_400(self, client, tenant):
        user = await create_user(client, tenant)
        response = await client.post(
            self.PATH, headers=tenant.w, json={"id": user["id"], "wallet_id": "nope"}
        )
        assert response.status_code == 400
        assert any(e.startswith("wallet_id: ") for e in response.json()["errors"])


class TestUnlink:
    async def test_needs_a_write_credential(self, client, database, tenant):
        user = await create_user(client, tenant)
        [wallet] = held(await linked(client, tenant, user, keypair()))
        path = f"/v1/users/wallets/{wallet['id']}"
        response = await client.delete(path)
        assert (response.status_code, response.json()) == (401, NO_CREDENTIAL)
        response = await client.delete(path, headers=tenant.r)
        assert (response.status_code, response.json()) == (403, READ_ONLY)
        profile = await client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
        assert len(held(profile.json())) == 1

    async def test_unlinked_and_the_custodial_wallet_receives_again(self, client, database, tenant):
        user = await create_user(client, tenant)
        answer = await linked(client, tenant, user, keypair())
        [wallet] = held(answer)
        await client.post(
            "/v1/users/wallets/receiving",
            headers=tenant.w,
            json={"id": user["id"], "wallet_id": wallet["id"]},
        )
        response = await client.delete(f"/v1/users/wallets/{wallet['id']}", headers=tenant.w)
        assert (response.status_code, response.content) == (204, b"")
        assert await receiving_of(database, user) is None
        profile = await client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
        assert profile.json()["wallets"] == [custodial_of(answer)]
        again = await client.delete(f"/v1/users/wallets/{wallet['id']}", headers=tenant.w)
        assert (again.status_code, again.json()) == (404, WALLET_NOT_FOUND)
        # Another held wallet now shows the custodial one receiving.
        later = await linked(client, tenant, user, keypair())
        assert later["receivingWalletId"] == custodial_of(answer)["id"]

    async def test_another_projects_or_an_unknown_wallet_is_404_and_stays(
        self, client, database, tenant, other
    ):
        theirs = await create_user(client, other)
        [wallet] = held(await linked(client, other, theirs, keypair()))
        before = await row_counts(database)
        for wallet_id in (wallet["id"], custodial_of(theirs)["id"], str(uuid.uuid4())):
            response = await client.delete(f"/v1/users/wallets/{wallet_id}", headers=tenant.w)
            assert (response.status_code, response.json()) == (404, WALLET_NOT_FOUND)
        assert await row_counts(database) == before
        response = await client.delete("/v1/users/wallets/not-a-uuid", headers=tenant.w)
        assert response.status_code == 400

    async def test_a_custodial_wallet_stays(self, client, database, tenant):
        user = await create_user(client, tenant)
        before = await row_counts(database)
        response = await client.delete(
            f"/v1/users/wallets/{custodial_of(user)['id']}", headers=tenant.w
        )
        assert (response.status_code, response.json()) == (
            409,
            {"message": "a custodial wallet cannot be unlinked"},
        )
        assert await row_counts(database) == before

    async def test_a_wallet_that_holds_the_projects_nfts_stays(self, client, database, tenant):
        user = await create_user(client, tenant)
        [wallet] = held(await linked(client, tenant, user, keypair()))
        product = await create_product(client, tenant)
        items = await issue_items(client, tenant, product["id"], user["id"], user["id"])
        async with orm.session(database) as session:  # where the worker recorded its mints
            await session.execute(
                update(ProductItem)
                .where(ProductItem.id.in_([uuid.UUID(item["id"]) for item in items]))
                .values(nft_wallet_id=uuid.UUID(wallet["id"]))
            )
            await session.commit()
        before = await row_counts(database)
        response = await client.delete(f"/v1/users/wallets/{wallet['id']}", headers=tenant.w)
        assert (response.status_code, response.json()) == (
            409,
            {"message": f"2 NFTs of this project sit in {wallet['address']}: it stays linked"},
        )
        assert await row_counts(database) == before
