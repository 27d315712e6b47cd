"""A project's check-in keys (``tessera.ticket_keys.service``) and the secrets they sign
(``tessera.ticket_keys.codes``): a rotation's key signs from then on while the earlier ones keep
verifying; a retired key verifies nothing, and retiring the last live one makes its successor;
the list, newest first, names the one key that signs; a process keeps its signer a while; keys
of another project never verify; the secrets' documented format, byte by byte."""

import base64
import re
import uuid

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from sqlalchemy import delete, func, select, update

from tessera.errors import CheckinKeyNotFound, ProjectNotFound
from tessera.models import CheckinKey
from tessera.ticket_keys import codes
from tessera.ticket_keys import service as ticket_keys
from tessera.ticket_keys.service import Signer, Signers
from tessera.toolkit.crypto import Sealed
from tests import orm
from tests.checkins.test_checkins import admission, scan, ticket

KID = re.compile(r"^[0-9a-f]{8}$")
PUBLIC_KEY = re.compile(r"^[A-Za-z0-9_-]{43}$")  # 32 bytes, base64url without padding
UNKNOWN = {"message": "no such ticket: not a ticket of this project", "reason": "unknown"}
INVALID = {
    "message": "this secret's signature does not hold: it was not made by this project",
    "reason": "invalid",
}
REVOKED = {
    "message": "this secret has been replaced (the ticket was reissued or passed on): ask the "
    "holder for the current one",
    "reason": "revoked",
}
NO_SUCH_KEY = (404, "the project has no live check-in key of this kid")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b32(data: bytes) -> str:
    return base64.b32encode(data).decode().rstrip("=")


def unb32(text: str) -> bytes:
    return base64.b32decode(text.upper() + "=" * (-len(text) % 8))


def public_bytes(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


async def key_rows(database, project_id: uuid.UUID | None = None) -> list[CheckinKey]:
    """The check-in keys (of one project, or all), oldest first."""
    query = select(CheckinKey).order_by(CheckinKey.created_at, CheckinKey.id)
    if project_id is not None:
        query = query.where(CheckinKey.project_id == project_id)
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(query))


async def key_count(database) -> int:
    async with orm.session(database, write=False) as session:
        return await session.scalar(select(func.count()).select_from(CheckinKey))


def state(rows: list[CheckinKey]) -> list[tuple]:
    """Each key as (id, kid, retired_at, sealed blob): equal means unchanged."""
    return [(row.id, row.kid, row.retired_at, row.secret_blob) for row in rows]


async def signer_now(app, database, project_id: uuid.UUID) -> Signer:
    """The project's signer as the app's process reads it afresh (not the one it kept)."""
    app.state.signers.forget(project_id)
    return await app.state.signers.of(database, project_id)


async def keyless(database, project_id: uuid.UUID) -> None:
    """The project as a release before check-in keys left it: none."""
    async with orm.session(database) as session:
        await session.execute(delete(CheckinKey).where(CheckinKey.project_id == project_id))
        await session.commit()


class TestRotate:
    async def test_the_new_key_signs_and_the_earlier_one_keeps_verifying(
        self, app, client, database, tenant
    ):
        _, product, _, old = await admission(client, tenant)
        [first] = await ticket_keys.list_keys(database, tenant.project_id)
        rotated = await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        assert KID.match(rotated.kid) and rotated.kid != first.kid
        assert PUBLIC_KEY.match(rotated.public_key) and rotated.public_key != first.public_key
        assert (rotated.alg, rotated.signing, rotated.retired_at) == ("Ed25519", True, None)
        keys = await ticket_keys.list_keys(database, tenant.project_id)
        assert [(k.kid, k.signing, k.retired_at) for k in keys] == [
            (rotated.kid, True, None),
            (first.kid, False, None),
        ]
        signer = await signer_now(app, database, tenant.project_id)
        assert signer.kid == rotated.kid
        assert public_bytes(signer.key) == unb64(rotated.public_key)
        new = await ticket(client, tenant, product)
        assert unb32(old["secret"])[1:5].hex() == first.kid
        assert unb32(new["secret"])[1:5].hex() == rotated.kid
        # Both name the same item at the same version: the earlier key's secret is used, and
        # the new key's is then known as the same, used, ticket.
        used = await scan(client, tenant, old["secret"])
        assert used.status_code == 200, used.text
        again = await scan(client, tenant, new["secret"])
        assert (again.status_code, again.json()) == (
            409,
            {
                "message": "this ticket has been used already",
                "reason": "already_checked_in",
                "checked_in_at": used.json()["checked_in_at"],
            },
        )

    async def test_an_unknown_project_is_404_and_gets_no_key(self, app, database, tenant):
        before = await key_count(database)
        with pytest.raises(ProjectNotFound) as refused:
            await ticket_keys.rotate(database, app.state.box, uuid.uuid4())
        assert (refused.value.status_code, refused.value.message) == (404, "project not found")
        assert await key_count(database) == before

    async def test_another_projects_keys_are_left_as_they_were(self, app, database, tenant, other):
        theirs = state(await key_rows(database, other.project_id))
        await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        assert state(await key_rows(database, other.project_id)) == theirs
        assert len(await key_rows(database, tenant.project_id)) == 2


class TestRetire:
    async def test_a_retired_key_verifies_nothing_it_signed(self, app, client, database, tenant):
        _, product, _, old = await admission(client, tenant)
        [first] = await ticket_keys.list_keys(database, tenant.project_id)
        rotated = await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        retired = await ticket_keys.retire(database, app.state.box, tenant.project_id, first.kid)
        assert (retired.kid, retired.public_key, retired.signing) == (
            first.kid,
            first.public_key,
            False,
        )
        assert retired.retired_at is not None and retired.retired_at >= first.created_at
        keys = await database.read(ticket_keys.project_keys, tenant.project_id)
        assert keys.live == {rotated.kid: unb64(rotated.public_key)}
        assert keys.retired == {first.kid: unb64(first.public_key)}
        refused = await scan(client, tenant, old["secret"])
        assert (refused.status_code, refused.json()) == (409, REVOKED)
        await signer_now(app, database, tenant.project_id)
        new = await ticket(client, tenant, product)
        assert unb32(new["secret"])[1:5].hex() == rotated.kid
        assert (await scan(client, tenant, new["secret"])).status_code == 200

    async def test_retiring_the_signing_key_makes_the_next_live_one_sign_and_makes_none(
        self, app, database, tenant
    ):
        [first] = await ticket_keys.list_keys(database, tenant.project_id)
        rotated = await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        await ticket_keys.retire(database, app.state.box, tenant.project_id, rotated.kid)
        keys = await ticket_keys.list_keys(database, tenant.project_id)
        assert [(k.kid, k.signing, k.retired_at is None) for k in keys] == [
            (rotated.kid, False, False),
            (first.kid, True, True),
        ]
        assert (await signer_now(app, database, tenant.project_id)).kid == first.kid

    async def test_the_successor_of_the_last_live_key_signs_secrets_that_scan(
        self, app, client, database, tenant
    ):
        _, product, _, old = await admission(client, tenant)
        [first] = await ticket_keys.list_keys(database, tenant.project_id)
        await ticket_keys.retire(database, app.state.box, tenant.project_id, first.kid)
        [successor, retired] = await ticket_keys.list_keys(database, tenant.project_id)
        assert (successor.signing, successor.retired_at, retired.kid) == (True, None, first.kid)
        assert KID.match(successor.kid) and successor.kid != first.kid
        signer = await signer_now(app, database, tenant.project_id)
        assert (signer.kid, public_bytes(signer.key)) == (
            successor.kid,
            unb64(successor.public_key),
        )
        new = await ticket(client, tenant, product)
        assert unb32(new["secret"])[1:5].hex() == successor.kid
        refused = await scan(client, tenant, old["secret"])
        assert (refused.status_code, refused.json()) == (409, REVOKED)
        assert (await scan(client, tenant, new["secret"])).status_code == 200

    async def test_an_unknown_retired_or_other_projects_kid_is_404_and_changes_nothing(
        self, app, database, tenant, other
    ):
        [first] = await ticket_keys.list_keys(database, tenant.project_id)
        [theirs] = await ticket_keys.list_keys(database, other.project_id)
        await ticket_keys.retire(database, app.state.box, tenant.project_id, first.kid)
        [successor, _] = await ticket_keys.list_keys(database, tenant.project_id)
        kids = {first.kid, theirs.kid, successor.kid}
        unknown = next(k for k in ("00000000", "ffffffff", "12345678") if k not in kids)
        before = state(await key_rows(database))
        for project_id, kid in (
            (tenant.project_id, unknown),
            (tenant.project_id, first.kid),  # retired already
            (tenant.project_id, theirs.kid),  # another project's
            (other.project_id, successor.kid),
            (uuid.uuid4(), successor.kid),  # no such project
            (tenant.project_id, ""),
            (tenant.project_id, "not a kid"),
        ):
            with pytest.raises(CheckinKeyNotFound) as refused:
                await ticket_keys.retire(database, app.state.box, project_id, kid)
            assert (refused.value.status_code, refused.value.message) == NO_SUCH_KEY, kid
        assert state(await key_rows(database)) == before

    async def test_the_kid_is_read_in_either_case(self, app, database, tenant):
        await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        [first, _] = await key_rows(database, tenant.project_id)
        async with orm.session(database) as session:  # a kid with letters, whatever was drawn
            await session.execute(
                update(CheckinKey).where(CheckinKey.id == first.id).values(kid="abcdef01")
            )
            await session.commit()
        retired = await ticket_keys.retire(database, app.state.box, tenant.project_id, "ABCDEF01")
        assert (retired.kid, retired.retired_at is not None) == ("abcdef01", True)


class TestListKeys:
    async def test_newest_first_with_the_one_that_signs_and_only_the_projects(
        self, app, database, tenant, other
    ):
        [first] = await ticket_keys.list_keys(database, tenant.project_id)
        second = await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        third = await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        await ticket_keys.retire(database, app.state.box, tenant.project_id, second.kid)
        keys = await ticket_keys.list_keys(database, tenant.project_id)
        assert [(k.kid, k.signing, k.retired_at is None) for k in keys] == [
            (third.kid, True, True),
            (second.kid, False, False),
            (first.kid, False, True),
        ]
        assert keys[0].created_at > keys[1].created_at > keys[2].created_at
        assert {k.model_dump()["alg"] for k in keys} == {"Ed25519"}
        assert set(keys[0].model_dump()) == {
            "kid",
            "alg",
            "public_key",
            "created_at",
            "retired_at",
            "signing",
        }
        # Each listed public key is the public half of the key sealed in its row.
        rows = {row.kid: row for row in await key_rows(database, tenant.project_id)}
        for key in keys:
            row = rows[key.kid]
            seed = app.state.box.open(
                Sealed(row.secret_key_id, row.secret_blob), aad=ticket_keys.checkin_key_aad(row.id)
            )
            private = Ed25519PrivateKey.from_private_bytes(seed)
            assert public_bytes(private) == unb64(key.public_key) == row.public_key
        [theirs] = await ticket_keys.list_keys(database, other.project_id)
        assert theirs.signing and theirs.kid not in {k.kid for k in keys}

    async def test_an_unknown_project_lists_nothing(self, database, tenant):
        assert await ticket_keys.list_keys(database, uuid.uuid4()) == []


class TestSigners:
    async def test_a_process_keeps_its_signer_until_it_forgets_or_the_time_passes(
        self, app, database, tenant, monkeypatch
    ):
        signers = Signers(app.state.box)  # a process of its own
        kept = await signers.of(database, tenant.project_id)
        rotated = await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        assert (await signers.of(database, tenant.project_id)).kid == kept.kid
        signers.forget(tenant.project_id)
        assert (await signers.of(database, tenant.project_id)).kid == rotated.kid
        newest = await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        assert (await signers.of(database, tenant.project_id)).kid == rotated.kid
        monkeypatch.setattr(ticket_keys, "SIGNER_SECONDS", 0.0)  # what it kept has expired
        assert (await signers.of(database, tenant.project_id)).kid == newest.kid

    async def test_the_signer_signs_what_the_listed_key_verifies(self, app, database, tenant):
        signer = await Signers(app.state.box).of(database, tenant.project_id)
        item = uuid.uuid4()
        secret = codes.read_signed(signer.secret(item, 7))
        assert secret is not None and (secret.kid, secret.item_id, secret.version) == (
            signer.kid,
            item,
            7,
        )
        keys = await database.read(ticket_keys.project_keys, tenant.project_id)
        assert list(keys.live) == [signer.kid] and keys.retired == {}
        assert codes.signature_holds(keys.live[signer.kid], secret)

    async def test_an_unknown_project_is_404_and_gets_no_key(self, app, database, tenant):
        before = await key_count(database)
        with pytest.raises(ProjectNotFound):
            await Signers(app.state.box).of(database, uuid.uuid4())
        assert await key_count(database) == before

    async def test_a_keyless_project_gets_one_key_where_it_is_first_needed(
        self, app, database, tenant
    ):
        await keyless(database, tenant.project_id)
        signers = Signers(app.state.box)
        made = await signers.of(database, tenant.project_id)
        [row] = await key_rows(database, tenant.project_id)
        assert (row.kid, row.retired_at, row.public_key) == (made.kid, None, public_bytes(made.key))
        signers.forget(tenant.project_id)
        assert (await signers.of(database, tenant.project_id)).kid == made.kid  # not another

    async def test_within_a_transaction_the_key_made_lasts_only_if_it_commits(
        self, app, database, tenant
    ):
        await keyless(database, tenant.project_id)
        signers = Signers(app.state.box)
        async with database.transaction() as tx:
            await signers.within(tx, tenant.project_id)  # rolled back: never committed
        assert await key_rows(database, tenant.project_id) == []
        async with database.transaction() as tx:
            made = await signers.within(tx, tenant.project_id)
            await tx.commit()
        [row] = await key_rows(database, tenant.project_id)
        assert row.kid == made.kid
        assert (await signers.of(database, tenant.project_id)).kid == made.kid

    async def test_every_keyless_project_is_keyed_once(self, app, database, tenant, other):
        await keyless(database, tenant.project_id)
        theirs = state(await key_rows(database, other.project_id))
        assert await ticket_keys.key_every_project(database, app.state.box) == 1
        [made] = await key_rows(database, tenant.project_id)
        assert made.retired_at is None
        assert await ticket_keys.key_every_project(database, app.state.box) == 0
        assert state(await key_rows(database, tenant.project_id)) == state([made])
        assert state(await key_rows(database, other.project_id)) == theirs


class TestOtherProjectsKeys:
    async def test_another_projects_key_never_verifies_this_projects_ticket(
        self, app, client, database, tenant, other
    ):
        _, _, _, shown = await admission(client, tenant)
        data = unb32(shown["secret"])
        item, kid = uuid.UUID(bytes=data[5:21]), data[1:5].hex()
        theirs = await Signers(app.state.box).of(database, other.project_id)
        for headers, secret, answer in (
            (tenant.w, theirs.secret(item, 1), UNKNOWN),  # their kid: not one of this project
            (tenant.w, codes.signed_secret(theirs.key, kid, item, 1), INVALID),  # our kid
            (other.w, theirs.secret(item, 1), UNKNOWN),  # their signature, not their ticket
            (other.w, shown["secret"], UNKNOWN),
        ):
            response = await client.post(
                "/v1/checkins", headers=headers, json={"secret": secret, "nonce": uuid.uuid4().hex}
            )
            assert (response.status_code, response.json()) == (404, answer)
        assert (await scan(client, tenant, shown["secret"])).status_code == 200

    async def test_a_version_never_handed_out_is_invalid_and_an_older_one_revoked(
        self, app, client, database, tenant
    ):
        _, product, _, shown = await admission(client, tenant)
        item = uuid.UUID(bytes=unb32(shown["secret"])[5:21])
        signer = await signer_now(app, database, tenant.project_id)
        ahead = await scan(client, tenant, signer.secret(item, 2))
        assert (ahead.status_code, ahead.json()) == (404, INVALID)
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/1/ticket/reissue", headers=tenant.w
        )
        assert reissued.status_code == 200
        assert unb32(reissued.json()["secret"])[21:25] == (2).to_bytes(4, "big")
        behind = await scan(client, tenant, signer.secret(item, 1))
        assert (behind.status_code, behind.json()) == (409, REVOKED)
        assert (await scan(client, tenant, signer.secret(item, 2))).status_code == 200


class TestSecretFormat:
    KID = "0a1b2c3d"
    HASH_KEY = bytes(range(32))

    def test_a_signed_secret_byte_by_byte(self):
        key, item = Ed25519PrivateKey.generate(), uuid.uuid4()
        secret = codes.signed_secret(key, self.KID, item, 258)
        assert re.fullmatch(r"[A-Z2-7]{143}", secret) and len(secret) == codes.SIGNED_LENGTH
        data = unb32(secret)
        assert len(data) == 89
        assert data[0] == 0x02
        assert data[1:5] == bytes.fromhex(self.KID)
        assert data[5:21] == item.bytes
        assert data[21:25] == (258).to_bytes(4, "big")
        key.public_key().verify(data[25:], data[:25])  # Ed25519's of the first 25 bytes
        read = codes.read_signed(secret)
        assert read == codes.SignedSecret(self.KID, item, 258, data[:25], data[25:])
        assert codes.read_signed(secret.lower()) == read  # either case
        assert codes.signature_holds(public_bytes(key), read)

    def test_a_changed_byte_or_another_key_does_not_hold(self):
        key, item = Ed25519PrivateKey.generate(), uuid.uuid4()
        data = unb32(codes.signed_secret(key, self.KID, item, 1))
        for position in range(1, 89):
            changed = bytearray(data)
            changed[position] ^= 0x01
            read = codes.read_signed(b32(bytes(changed)))
            assert read is not None and not codes.signature_holds(public_bytes(key), read), position
        other = Ed25519PrivateKey.generate()
        read = codes.read_signed(b32(data))
        assert read is not None and not codes.signature_holds(public_bytes(other), read)
        with pytest.raises(InvalidSignature):
            other.public_key().verify(data[25:], data[:25])

    def test_any_other_text_is_no_signed_secret(self):
        key, item = Ed25519PrivateKey.generate(), uuid.uuid4()
        secret = codes.signed_secret(key, self.KID, item, 1)
        data = unb32(secret)
        for text in (
            b32(b"\x01" + data[1:]),  # another format
            secret[:-1],
            secret + "A",
            secret[:-1] + "1",  # not base32
            codes.secret(self.HASH_KEY, item, 1),  # legacy
            "",
        ):
            assert codes.read_signed(text) is None, text

    def test_a_legacy_secret_and_a_page_token_by_their_macs(self):
        item = uuid.uuid4()
        secret = codes.secret(self.HASH_KEY, item, 3)
        assert re.fullmatch(r"[A-Z2-7]{52}", secret) and len(secret) == codes.SECRET_LENGTH
        assert unb32(secret)[:16] == item.bytes
        assert codes.item_of(codes.Use.SECRET, secret) == item
        assert codes.is_current(self.HASH_KEY, codes.Use.SECRET, secret, 3)
        assert codes.is_current(self.HASH_KEY, codes.Use.SECRET, secret.lower(), 3)
        assert not codes.is_current(self.HASH_KEY, codes.Use.SECRET, secret, 4)
        assert not codes.is_current(bytes(32), codes.Use.SECRET, secret, 3)
        token = codes.page_token(self.HASH_KEY, item, 3)
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token) and len(token) == codes.TOKEN_LENGTH
        raw_token = base64.urlsafe_b64decode(token + "=")
        assert raw_token[:16] == item.bytes
        assert raw_token[16:] != unb32(secret)[16:]  # another key of the MAC
        assert codes.item_of(codes.Use.PAGE, token) == item
        assert codes.is_current(self.HASH_KEY, codes.Use.PAGE, token, 3)
        assert not codes.is_current(self.HASH_KEY, codes.Use.PAGE, token, 2)
        assert codes.page_url("https://t.example", self.HASH_KEY, item, 3) == (
            f"https://t.example/tickets/{token}"
        )
        for use, text in ((codes.Use.SECRET, "A" * 51), (codes.Use.PAGE, "!" * 43)):
            assert codes.item_of(use, text) is None
            assert not codes.is_current(self.HASH_KEY, use, text, 3)

    def test_a_legacy_secret_is_recognised_sixteen_versions_back(self):
        item = uuid.uuid4()
        fourth = codes.secret(self.HASH_KEY, item, 4)
        assert codes.legacy_version(self.HASH_KEY, fourth, 4) == 4
        assert codes.legacy_version(self.HASH_KEY, fourth, 19) == 4  # 19 down to 4: sixteen
        assert codes.legacy_version(self.HASH_KEY, fourth, 20) is None
        assert codes.legacy_version(self.HASH_KEY, fourth, 3) is None  # not handed out yet
        assert codes.LEGACY_LOOKBACK == 16

    def test_what_has_a_secrets_shape(self):
        key, item = Ed25519PrivateKey.generate(), uuid.uuid4()
        assert codes.is_secret_shaped(codes.signed_secret(key, self.KID, item, 1))
        assert codes.is_secret_shaped(codes.secret(self.HASH_KEY, item, 1))
        assert codes.is_secret_shaped("a" * 52)  # shaped, whatever it names
        for text in ("", "A" * 51, "A" * 53, codes.page_token(self.HASH_KEY, item, 1) + "0"):
            assert not codes.is_secret_shaped(text), text
