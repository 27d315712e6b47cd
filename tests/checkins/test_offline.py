"""The door offline: signed secrets checked with the synced key by another Ed25519 library
(libsodium's), the check-in key's reach, the sync and its cursor, scans uploaded later with
their conflicts, key rotation and retirement, and bad input that changes nothing."""

import base64
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey
from sqlalchemy import update

from tessera.models import Attendee, ProductItem, User
from tessera.models.base import utcnow
from tessera.ticket_keys import codes as ticket_codes
from tessera.ticket_keys import service as ticket_keys
from tests import orm
from tests.changes.feed import of_type
from tests.checkins.test_checkins import admission, annul, attendee_of, scan, ticket
from tests.factories import (
    create_event,
    create_product,
    create_users,
    door_key,
    issue_items,
    row_counts,
)


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def raw(secret: str) -> bytes:
    return base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))


def at(seconds_ago: int) -> str:
    """An RFC 3339 time ``seconds_ago`` before now (whole seconds, with an offset)."""
    return (datetime.now(UTC) - timedelta(seconds=seconds_ago)).replace(microsecond=0).isoformat()


def offline(secret: str, *, event: dict, scanned_at: str, device: str = "door-1", **extra):
    return {
        "secret": secret,
        "nonce": extra.pop("nonce", uuid.uuid4().hex),
        "event_id": event["id"],
        "scanned_at": scanned_at,
        "device": device,
    } | extra


async def sync(client, headers, event: dict, since: str | None = None) -> dict:
    params = {"event_id": event["id"]} | ({"since": since} if since else {})
    response = await client.get("/v1/checkins/sync", headers=headers, params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def upload(client, headers, *scans: dict):
    return await client.post("/v1/checkins/batch", headers=headers, json={"scans": list(scans)})


class TestSignedSecret:
    async def test_the_secret_verifies_with_the_synced_key_and_a_changed_byte_does_not(
        self, client, tenant
    ):
        event, product, _, shown = await admission(client, tenant)
        synced = await sync(client, tenant.r, event)
        [key] = synced["keys"]
        assert key["alg"] == "Ed25519" and len(unb64(key["public_key"])) == 32
        secret = shown["secret"]
        assert len(secret) == 143 and secret == secret.upper()
        data = raw(secret)
        assert len(data) == 89 and data[0] == 0x02
        assert data[1:5].hex() == key["kid"]
        [synced_ticket] = synced["tickets"]
        assert uuid.UUID(bytes=data[5:21]) == uuid.UUID(synced_ticket["id"])
        assert int.from_bytes(data[21:25], "big") == synced_ticket["ticket_version"] == 1
        verifier = VerifyKey(unb64(key["public_key"]))
        assert verifier.verify(data[:25], data[25:]) == data[:25]
        for position in (0, 3, 12, 22, 40, 88):
            changed = bytearray(data)
            changed[position] ^= 0x01
            with pytest.raises(BadSignatureError):
                verifier.verify(bytes(changed[:25]), bytes(changed[25:]))
        assert synced_ticket == {
            "item_id": 1,
            "id": synced_ticket["id"],
            "ticket_version": 1,
            "product_id": product["id"],
            "holder_name": synced_ticket["holder_name"],
            "redemption_count": 0,
            "redemption_quantity": 1,
            "checked_in_at": None,
        }

    async def test_a_bad_signature_is_invalid_and_an_older_version_revoked(self, client, tenant):
        _, product, _, shown = await admission(client, tenant)
        data = bytearray(raw(shown["secret"]))
        data[60] ^= 0x80
        forged = base64.b32encode(bytes(data)).decode().rstrip("=")
        response = await scan(client, tenant, forged)
        assert (response.status_code, response.json()["reason"]) == (404, "invalid")
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/1/ticket/reissue", headers=tenant.w
        )
        assert reissued.status_code == 200
        response = await scan(client, tenant, shown["secret"])
        assert (response.status_code, response.json()["reason"]) == (409, "revoked")
        assert (await scan(client, tenant, reissued.json()["secret"])).status_code == 200

    async def test_a_legacy_secret_still_works_online(self, app, client, tenant, database):
        _, product, _, shown = await admission(client, tenant)
        item_id = uuid.UUID(bytes=raw(shown["secret"])[5:21])
        hash_key = app.state.settings.hash_key_bytes
        legacy = ticket_codes.secret(hash_key, item_id, 1)
        assert (await scan(client, tenant, legacy.lower(), "legacy")).status_code == 200
        await client.post(f"/v1/products/{product['id']}/items/1/ticket/reissue", headers=tenant.w)
        again = await scan(client, tenant, legacy)
        assert (again.status_code, again.json()["reason"]) == (409, "revoked")
        forged = legacy[:-4] + ("AAAA" if legacy[-4:] != "AAAA" else "BBBB")
        response = await scan(client, tenant, forged)
        assert response.json()["reason"] == "invalid"

    async def test_rotation_keeps_old_secrets_until_the_key_is_retired(
        self, app, client, tenant, database
    ):
        event, product, _, old = await admission(client, tenant)
        [first] = (await sync(client, tenant.r, event))["keys"]
        rotated = await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        assert rotated.kid != first["kid"] and rotated.signing
        app.state.signers.forget(tenant.project_id)  # as every process does within 10 s
        new = await ticket(client, tenant, product)
        assert new["secret"] != old["secret"] and raw(new["secret"])[1:5].hex() == rotated.kid
        assert {k["kid"] for k in (await sync(client, tenant.r, event))["keys"]} == {
            first["kid"],
            rotated.kid,
        }
        annulled = await scan(client, tenant, old["secret"], "old-key")
        assert annulled.status_code == 200  # the rotated-out key still verifies
        await client.post("/v1/checkins/annul", headers=tenant.w, json={"nonce": "old-key"})
        retired = await ticket_keys.retire(database, app.state.box, tenant.project_id, first["kid"])
        assert retired.retired_at is not None
        assert [k["kid"] for k in (await sync(client, tenant.r, event))["keys"]] == [rotated.kid]
        response = await scan(client, tenant, old["secret"])
        assert (response.status_code, response.json()["reason"]) == (409, "revoked")
        assert (await scan(client, tenant, new["secret"])).status_code == 200
        keys = await ticket_keys.list_keys(database, tenant.project_id)
        assert [(k.kid, k.signing, k.retired_at is None) for k in keys] == [
            (rotated.kid, True, True),
            (first["kid"], False, False),
        ]


class TestCheckinKey:
    async def test_the_door_may_scan_sync_and_upload_and_nothing_else(self, app, client, tenant):
        event, product, ada, shown = await admission(client, tenant)
        door = await door_key(app, tenant)
        response = await client.post(
            "/v1/users/create", headers=door, json={"email": "eve@example.com"}
        )
        assert response.status_code == 403
        response = await client.post(
            f"/v1/products/{product['id']}/items", headers=door, json={"users": [ada["id"]]}
        )
        assert response.status_code == 403
        assert (await client.get("/v1/users/count", headers=door)).status_code == 403
        assert (await client.get("/v1/checkins/events", headers=door)).json() == {
            "events": [
                {
                    "id": event["id"],
                    "name": event["name"],
                    "start_date": event["start_date"],
                    "end_date": event["end_date"],
                    "location": event["location"],
                }
            ]
        }
        assert (await sync(client, door, event))["tickets"]
        scanned = await client.post(
            "/v1/checkins", headers=door, json={"secret": shown["secret"], "nonce": "door-1"}
        )
        assert scanned.status_code == 200, scanned.text
        # Made after the scan at the door: the ticket was used already.
        uploaded = await upload(
            client, door, offline(shown["secret"], event=event, scanned_at=at(0))
        )
        assert uploaded.status_code == 200, uploaded.text
        assert uploaded.json()["results"][0]["status"] == "already_checked_in"
        annulled = await client.post("/v1/checkins/annul", headers=door, json={"nonce": "door-1"})
        assert annulled.status_code == 200
        # A read key reads the sync, but cannot upload.
        assert (await sync(client, tenant.r, event))["tickets"]
        assert (
            await upload(client, tenant.r, offline("x", event=event, scanned_at=at(1)))
        ).status_code == 403


class TestUpload:
    @pytest.mark.parametrize("earlier_first", [True, False], ids=["in-order", "later-first"])
    async def test_two_doors_admit_one_ticket_offline_the_earlier_scan_wins(
        self, app, client, tenant, database, earlier_first
    ):
        event, product, ada, shown = await admission(client, tenant)
        door = await door_key(app, tenant)
        earlier, later = at(300), at(120)
        first_scan = offline(shown["secret"], event=event, scanned_at=earlier, device="north")
        second_scan = offline(shown["secret"], event=event, scanned_at=later, device="south")
        when = int(datetime.fromisoformat(earlier).timestamp())
        then = int(datetime.fromisoformat(later).timestamp())
        uploads = [first_scan, second_scan] if earlier_first else [second_scan, first_scan]
        answers = []
        for made in uploads:
            response = await upload(client, door, made)
            assert response.status_code == 200, response.text
            answers.append(response.json()["results"])
        # Each upload answered what was known then: the earlier scan is ok either way; the
        # later one was ok while it was the only one, and lost its use to the earlier since.
        first_answer = {"nonce": first_scan["nonce"], "status": "ok", "checked_in_at": when}
        if earlier_first:
            assert answers == [
                [first_answer],
                [
                    {
                        "nonce": second_scan["nonce"],
                        "status": "already_checked_in",
                        "checked_in_at": when,
                    }
                ],
            ]
        else:
            assert answers == [
                [{"nonce": second_scan["nonce"], "status": "ok", "checked_in_at": then}],
                [first_answer],
            ]
        # Whatever the order, the same end: one use, held by the earlier scan; the holder
        # checked in at its time; the later scan a conflict with it.
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] == when
        items = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        assert items.json()["items"][0]["redemption_count"] == 1
        assert items.json()["items"][0]["redeemed_at"] == when
        listed = await client.get(
            "/v1/checkins", headers=tenant.r, params={"event_id": event["id"], "conflicts": "true"}
        )
        assert listed.status_code == 200, listed.text
        [conflict] = listed.json()["scans"]
        assert listed.json()["pagination"] == {"page": 1, "limit": 20, "total": 1}
        assert conflict["nonce"] == second_scan["nonce"] and conflict["device"] == "south"
        assert conflict["conflict_with"] == first_scan["nonce"]
        assert conflict["status"] == "already_checked_in" and conflict["source"] == "offline"
        assert datetime.fromisoformat(conflict["scanned_at"]) == datetime.fromisoformat(later)
        everything = await client.get(
            "/v1/checkins", headers=tenant.r, params={"event_id": event["id"]}
        )
        assert [s["nonce"] for s in everything.json()["scans"]] == [m["nonce"] for m in uploads]
        assert [s["status"] for s in everything.json()["scans"] if s["status"] == "ok"] == ["ok"]
        created = await of_type(client, tenant, "checkin.created")
        displaced = await of_type(client, tenant, "checkin.displaced")
        assert len(created) == (1 if earlier_first else 2)
        if earlier_first:
            assert displaced == []
        else:
            assert [change["data"] for change in displaced] == [
                {
                    "message": "this ticket has been used already",
                    "reason": "already_checked_in",
                    "checked_in_at": when,
                    "nonce": second_scan["nonce"],
                    "conflict_with": first_scan["nonce"],
                }
            ]
        # Both scans again, in one batch: the answers as they now stand, nothing changed.
        counts = await row_counts(database)
        again = await upload(client, door, first_scan, second_scan)
        assert [r["status"] for r in again.json()["results"]] == ["ok", "already_checked_in"]
        assert await row_counts(database) == counts
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] == when

    async def test_a_holder_is_checked_in_at_the_earliest_scan_of_any_of_their_tickets(
        self, app, client, tenant
    ):
        event, product, ada, shown = await admission(client, tenant)
        await issue_items(client, tenant, product["id"], ada["id"])
        second = await ticket(client, tenant, product, 2)
        door = await door_key(app, tenant)
        early, late = at(600), at(200)
        # The later scan (of the other ticket) reaches the server first, then the earlier.
        await upload(client, door, offline(second["secret"], event=event, scanned_at=late))
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] == int(
            datetime.fromisoformat(late).timestamp()
        )
        await upload(client, door, offline(shown["secret"], event=event, scanned_at=early))
        earliest = int(datetime.fromisoformat(early).timestamp())
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] == earliest
        # A third ticket scanned at the door now moves nothing.
        await issue_items(client, tenant, product["id"], ada["id"])
        third = await ticket(client, tenant, product, 3)
        assert (await scan(client, tenant, third["secret"], "now")).status_code == 200
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] == earliest

    async def test_annulling_the_earliest_scan_leaves_the_next_earliest(self, app, client, tenant):
        event, product, ada, shown = await admission(client, tenant)
        await issue_items(client, tenant, product["id"], ada["id"])
        second = await ticket(client, tenant, product, 2)
        door = await door_key(app, tenant)
        assert (await scan(client, tenant, second["secret"], "at-the-door")).status_code == 200
        now = (await attendee_of(client, tenant, event, ada))["checked_in_at"]
        early = offline(shown["secret"], event=event, scanned_at=at(600))
        await upload(client, door, early)
        earliest = int(datetime.fromisoformat(early["scanned_at"]).timestamp())
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] == earliest
        undone = await annul(client, tenant, early["nonce"])
        assert (undone.status_code, undone.json()["checked_in_at"]) == (200, now)
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] == now
        undone = await annul(client, tenant, "at-the-door")
        assert (undone.status_code, undone.json()["checked_in_at"]) == (200, None)
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] is None
        history = await client.post(
            "/v1/users/reputation/history", headers=tenant.r, json={"id": ada["id"]}
        )
        assert history.json()["balance"] == 0  # the first check-in's point taken back
        assert [e["delta"] for e in history.json()["entries"]] == [1, -1]

    async def test_the_scans_and_their_conflicts_page(self, app, client, tenant):
        event, product, ada, _ = await admission(client, tenant)
        await issue_items(client, tenant, product["id"], ada["id"], ada["id"])
        door = await door_key(app, tenant)
        secrets = [(await ticket(client, tenant, product, n))["secret"] for n in (1, 2, 3)]
        scans = [offline(s, event=event, scanned_at=at(100)) for s in secrets]
        scans += [offline(s, event=event, scanned_at=at(50), device="door-2") for s in secrets]
        await upload(client, door, *scans)
        path, query = "/v1/checkins", {"event_id": event["id"], "conflicts": "true"}
        first = await client.get(path, headers=tenant.r, params=query | {"limit": 2})
        assert first.json()["pagination"] == {"page": 1, "limit": 2, "total": 3}
        last = await client.get(path, headers=tenant.r, params=query | {"limit": 2, "page": 2})
        assert last.json()["pagination"] == {"page": 2, "limit": 2, "total": 3}
        paged = [s["nonce"] for s in first.json()["scans"] + last.json()["scans"]]
        assert paged == [s["nonce"] for s in scans[3:]]
        everything = await client.get(path, headers=tenant.r, params={"event_id": event["id"]})
        assert everything.json()["pagination"]["total"] == 6
        for bad, error in (
            ({"page": 0}, "page: Input should be greater than or equal to 1"),
            ({"limit": 101}, "limit: Input should be less than or equal to 100"),
        ):
            response = await client.get(path, headers=tenant.r, params=query | bad)
            assert (response.status_code, response.json()) == (400, {"errors": [error]})

    async def test_one_batch_takes_its_scans_in_the_order_they_were_made(self, app, client, tenant):
        event, _, ada, shown = await admission(client, tenant)
        door = await door_key(app, tenant)
        late = offline(shown["secret"], event=event, scanned_at=at(10), device="a")
        early = offline(shown["secret"], event=event, scanned_at=at(50), device="b")
        response = await upload(client, door, late, early)
        assert [r["status"] for r in response.json()["results"]] == ["already_checked_in", "ok"]
        when = int(datetime.fromisoformat(early["scanned_at"]).timestamp())
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] == when

    async def test_each_scan_answers_what_it_is(self, app, client, tenant, other):
        event, product, _, shown = await admission(client, tenant)
        elsewhere = await create_event(client, tenant, name="Elsewhere")
        _, _, _, theirs = await admission(client, other)
        await client.post(f"/v1/products/{product['id']}/items/1/ticket/reissue", headers=tenant.w)
        current = await ticket(client, tenant, product)
        data = bytearray(raw(current["secret"]))
        data[70] ^= 1
        scans = [
            offline(current["secret"], event=elsewhere, scanned_at=at(9)),
            offline(shown["secret"], event=event, scanned_at=at(8)),
            offline(
                base64.b32encode(bytes(data)).decode().rstrip("="), event=event, scanned_at=at(7)
            ),
            offline(theirs["secret"], event=event, scanned_at=at(6)),
            offline("https://example.org/t/1", event=event, scanned_at=at(5)),
            offline(current["secret"], event=event, scanned_at=at(4)),
        ]
        response = await upload(client, await door_key(app, tenant), *scans)
        assert [r["status"] for r in response.json()["results"]] == [
            "wrong_event",
            "revoked",
            "invalid",
            "unknown",
            "unknown",
            "ok",
        ]

    async def test_a_scan_from_the_future_is_taken_as_made_now(self, app, client, tenant):
        event, _, _, shown = await admission(client, tenant)
        future = (datetime.now(UTC) + timedelta(hours=5)).isoformat()
        before = int(utcnow().timestamp())
        response = await upload(
            client,
            await door_key(app, tenant),
            offline(shown["secret"], event=event, scanned_at=future),
        )
        [result] = response.json()["results"]
        assert result["status"] == "ok" and before <= result["checked_in_at"] <= before + 5

    async def test_five_hundred_scans_in_one_request(self, app, client, tenant, database):
        event = await create_event(client, tenant)
        product = await create_product(client, tenant, event_id=event["id"])
        users = await create_users(client, tenant, 250)
        await issue_items(client, tenant, product["id"], *[u["id"] for u in users])
        secrets = [(await ticket(client, tenant, product, n))["secret"] for n in range(1, 251)]
        scans = [offline(s, event=event, scanned_at=at(60)) for s in secrets]
        scans += [offline(s, event=event, scanned_at=at(30), device="door-2") for s in secrets]
        response = await upload(client, await door_key(app, tenant), *scans)
        assert response.status_code == 200, response.text
        statuses = [r["status"] for r in response.json()["results"]]
        assert statuses == ["ok"] * 250 + ["already_checked_in"] * 250
        synced = await sync(client, tenant.r, event)
        assert {t["redemption_count"] for t in synced["tickets"]} == {1}


class TestSync:
    async def test_since_a_cursor_only_what_changed(self, client, tenant, database):
        event, product, _, shown = await admission(client, tenant)
        [bob, cleo] = await create_users(client, tenant, 2)
        await issue_items(client, tenant, product["id"], bob["id"])
        first = await sync(client, tenant.r, event)
        assert len(first["tickets"]) == 2
        # Everything as it was an hour ago: past the cursor's overlap, nothing has changed.
        hour_ago = utcnow() - timedelta(hours=1)
        async with orm.session(database) as session:
            for model in (ProductItem, User, Attendee):
                await session.execute(
                    update(model)
                    .where(model.project_id == tenant.project_id)
                    .values(updated_at=hour_ago)
                )
            await session.commit()
        cursor = first["cursor"]
        assert (await sync(client, tenant.r, event, cursor))["tickets"] == []
        await issue_items(client, tenant, product["id"], cleo["id"])
        assert (await scan(client, tenant, shown["secret"])).status_code == 200
        changed = await sync(client, tenant.r, event, cursor)
        by_item = {t["item_id"]: t for t in changed["tickets"]}
        assert set(by_item) == {1, 3}  # Ada's, used; Cleo's, new; not Bob's
        assert by_item[1]["redemption_count"] == 1 and by_item[1]["checked_in_at"] is not None
        assert changed["keys"] == first["keys"]
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/2/ticket/reissue", headers=tenant.w
        )
        assert reissued.status_code == 200
        again = await sync(client, tenant.r, event, changed["cursor"])
        assert {t["item_id"]: t["ticket_version"] for t in again["tickets"]}[2] == 2

    async def test_another_projects_event_and_bad_cursors(self, client, tenant, other):
        event, _, _, _ = await admission(client, tenant)
        response = await client.get(
            "/v1/checkins/sync", headers=other.r, params={"event_id": event["id"]}
        )
        assert response.status_code == 404
        for since in ("nope", "1" * 17, "-5", "1.5", ""):
            response = await client.get(
                "/v1/checkins/sync",
                headers=tenant.r,
                params={"event_id": event["id"], "since": since},
            )
            assert response.status_code == 400, since
            assert list(response.json()) == ["errors"]


class TestBadInput:
    @pytest.mark.parametrize(
        "scans",
        [
            [{"secret": "A" * 10_240}],
            [{"secret": "AB\x00CD"}],
            [{"scanned_at": "yesterday"}],
            [{"scanned_at": "2026-11-28T10:00:00"}],  # no offset: not RFC 3339
            [{"scanned_at": 0}],
            [{"scanned_at": "1795775000"}],
            [{"scanned_at": "2026-11-28"}],
            [{"device": ""}],
            [{"nonce": ""}],
            [{"event_id": "nope"}],
            [{"extra": 1}],
            [{}] * 501,
            [],
        ],
        ids=lambda scans: f"{len(scans)}:" + ",".join(f"{k}" for k in (scans[0] if scans else {})),
    )
    async def test_is_400_and_changes_nothing(self, app, client, tenant, database, scans):
        event, _, _, shown = await admission(client, tenant)
        good = offline(shown["secret"], event=event, scanned_at=at(1))
        body = {"scans": [good | scan for scan in scans]}
        door = await door_key(app, tenant)
        counts = await row_counts(database)
        response = await client.post("/v1/checkins/batch", headers=door, json=body)
        assert response.status_code == 400, response.text
        assert list(response.json()) == ["errors"] and response.json()["errors"]
        assert await row_counts(database) == counts
