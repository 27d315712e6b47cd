"""Tickets through the API (the secret, its page's URL, a reissue) and scanning at the door
(``POST /v1/checkins``) with its undo window (``POST /v1/checkins/annul``)."""

import asyncio
import re
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import update

from tessera.models import Checkin
from tessera.models.base import utcnow
from tests import orm
from tests.changes.feed import of_type
from tests.factories import (
    create_event,
    create_product,
    create_users,
    issue_items,
    row_counts,
    transfer_item,
)

SECRET = re.compile(r"^[A-Z2-7]{143}$")


async def ticket(client, tenant, product: dict, key: object = 1) -> dict:
    response = await client.get(
        f"/v1/products/{product['id']}/items/{key}/ticket", headers=tenant.r
    )
    assert response.status_code == 200, response.text
    return response.json()


async def scan(client, tenant, secret: str, nonce: str | None = None, **extra):
    body = {"secret": secret, "nonce": nonce or uuid.uuid4().hex} | extra
    return await client.post("/v1/checkins", headers=tenant.w, json=body)


async def annul(client, tenant, nonce: str):
    return await client.post("/v1/checkins/annul", headers=tenant.w, json={"nonce": nonce})


async def attendee_of(client, tenant, event: dict, user: dict) -> dict | None:
    response = await client.get(f"/v1/events/{event['id']}/attendees", headers=tenant.r)
    assert response.status_code == 200, response.text
    return next((a for a in response.json()["attendees"] if a["user"]["id"] == user["id"]), None)


async def admission(client, tenant, **extra) -> tuple[dict, dict, dict, dict]:
    """An event, a single-use admission to it, a user holding item 1, and its ticket."""
    event = await create_event(client, tenant)
    product = await create_product(client, tenant, event_id=event["id"], **extra)
    [ada] = await create_users(client, tenant, 1)
    await issue_items(client, tenant, product["id"], ada["id"])
    return event, product, ada, await ticket(client, tenant, product)


class TestTicket:
    async def test_an_items_secret_and_page(self, client, tenant):
        _, product, _, shown = await admission(client, tenant)
        assert set(shown) == {"item_id", "secret", "url"}
        assert shown["item_id"] == 1 and SECRET.match(shown["secret"])
        assert re.match(r"^http://tessera\.test/tickets/[A-Za-z0-9_-]{43}$", shown["url"])
        [item] = (await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)).json()[
            "items"
        ]
        assert await ticket(client, tenant, product, item["id"]) == shown  # by its id too
        assert await ticket(client, tenant, product) == shown  # stable until reissued

    async def test_another_projects_item_and_unknown_ones_are_404(self, client, tenant, other):
        _, product, _, _ = await admission(client, tenant)
        for headers, path in (
            (other.r, f"/v1/products/{product['id']}/items/1/ticket"),
            (tenant.r, f"/v1/products/{product['id']}/items/2/ticket"),
            (tenant.r, f"/v1/products/{uuid.uuid4()}/items/1/ticket"),
        ):
            response = await client.get(path, headers=headers)
            assert response.status_code == 404, path
        reissue = f"/v1/products/{product['id']}/items/1/ticket/reissue"
        assert (await client.post(reissue, headers=other.w)).status_code == 404
        assert (await client.post(reissue, headers=tenant.r)).status_code == 403

    async def test_a_reissue_replaces_the_secret_and_page_at_once(self, client, tenant):
        _, product, ada, old = await admission(client, tenant)
        response = await client.post(
            f"/v1/products/{product['id']}/items/1/ticket/reissue", headers=tenant.w
        )
        assert response.status_code == 200, response.text
        new = response.json()
        assert new["item_id"] == 1 and new["secret"] != old["secret"] and new["url"] != old["url"]
        assert await ticket(client, tenant, product) == new
        gone = await scan(client, tenant, old["secret"])
        assert (gone.status_code, gone.json()["reason"]) == (409, "revoked")
        assert (await scan(client, tenant, new["secret"])).status_code == 200
        [change] = await of_type(client, tenant, "ticket.reissued")
        assert change["data"]["item_id"] == 1 and change["data"]["user_id"] == ada["id"]
        assert old["secret"] not in str(change) and new["secret"] not in str(change)

    async def test_a_transfer_gives_the_new_holder_a_new_ticket(self, client, tenant):
        _, product, ada, old = await admission(client, tenant, is_transferable=True)
        [bob] = await create_users(client, tenant, 1)
        [item] = (await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)).json()[
            "items"
        ]
        moved = await transfer_item(client, tenant, product["id"], item["id"], ada, bob)
        assert moved.status_code == 200, moved.text
        new = await ticket(client, tenant, product)
        assert new["secret"] != old["secret"]
        gone = await scan(client, tenant, old["secret"])
        assert (gone.status_code, gone.json()["reason"]) == (409, "revoked")
        ok = await scan(client, tenant, new["secret"])
        assert ok.json()["holder"]["id"] == bob["id"]


class TestScan:
    async def test_a_scan_checks_the_holder_in_and_redeems_one_use(self, client, tenant):
        event, product, ada, shown = await admission(client, tenant)
        response = await scan(client, tenant, shown["secret"].lower(), "n-1")  # either case
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer == {
            "status": "ok",
            "item_id": 1,
            "product_id": product["id"],
            "event_id": event["id"],
            "checked_in_at": answer["checked_in_at"],
            "holder": {
                "id": ada["id"],
                "email": ada["email"],
                "first_name": ada["firstName"],
                "last_name": ada["lastName"],
            },
            "redemption_count": 1,
            "redemption_quantity": 1,
        }
        attendee = await attendee_of(client, tenant, event, ada)
        assert attendee["checked_in_at"] == answer["checked_in_at"]
        items = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        assert items.json()["items"][0]["redemption_count"] == 1
        [created] = await of_type(client, tenant, "checkin.created")
        assert created["data"] == answer | {"nonce": "n-1"}

    async def test_the_same_nonce_again_counts_once(self, client, tenant, database):
        _, product, _, shown = await admission(client, tenant, redemption_quantity=5)
        first = await scan(client, tenant, shown["secret"], "same")
        counts = await row_counts(database)
        again = await scan(client, tenant, shown["secret"], "same")
        assert (again.status_code, again.json()) == (200, first.json())
        assert await row_counts(database) == counts
        items = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        assert items.json()["items"][0]["redemption_count"] == 1

    async def test_a_used_up_ticket_says_when_it_was_checked_in(self, client, tenant):
        _, _, _, shown = await admission(client, tenant)
        ok = (await scan(client, tenant, shown["secret"])).json()
        response = await scan(client, tenant, shown["secret"])
        assert response.status_code == 409
        assert response.json() == {
            "message": "this ticket has been used already",
            "reason": "already_checked_in",
            "checked_in_at": ok["checked_in_at"],
        }

    async def test_a_ticket_of_another_event_is_refused(self, client, tenant):
        _, _, _, shown = await admission(client, tenant)
        elsewhere = await create_event(client, tenant)
        response = await scan(client, tenant, shown["secret"], event_id=elsewhere["id"])
        assert (response.status_code, response.json()["reason"]) == (409, "wrong_event")
        assert (await scan(client, tenant, shown["secret"])).status_code == 200  # not counted

    async def test_a_product_without_an_event_is_checked_in_by_redemption(self, client, tenant):
        product = await create_product(client, tenant, redemption_quantity=2)
        [ada] = await create_users(client, tenant, 1)
        await issue_items(client, tenant, product["id"], ada["id"])
        shown = await ticket(client, tenant, product)
        first = (await scan(client, tenant, shown["secret"])).json()
        assert (first["event_id"], first["redemption_count"]) == (None, 1)
        assert (await scan(client, tenant, shown["secret"])).json()["redemption_count"] == 2
        refused = await scan(client, tenant, shown["secret"])
        assert refused.json()["reason"] == "already_checked_in"

    async def test_any_text_and_other_projects_secrets_are_404_unknown(self, client, tenant, other):
        _, _, _, shown = await admission(client, tenant)
        _, _, _, theirs = await admission(client, other)
        for headers, secret in (
            (tenant.w, "A" * 52),
            (tenant.w, "https://example.org/tickets/123"),
            (tenant.w, "qwertzuiopasdfghjklyxcvbnmqwertzuiopasdfghj"),  # 43 letters
            (tenant.w, ""),
            (tenant.w, "é" * 1000),
            (tenant.w, theirs["secret"]),
            (other.w, shown["secret"]),
        ):
            response = await client.post(
                "/v1/checkins", headers=headers, json={"secret": secret, "nonce": uuid.uuid4().hex}
            )
            assert response.status_code == 404, secret
            assert response.json() == {
                "message": "no such ticket: not a ticket of this project",
                "reason": "unknown",
            }
        assert (await scan(client, tenant, shown["secret"])).status_code == 200

    async def test_a_read_credential_cannot_scan(self, client, tenant):
        _, _, _, shown = await admission(client, tenant)
        response = await client.post(
            "/v1/checkins", headers=tenant.r, json={"secret": shown["secret"], "nonce": "r"}
        )
        assert response.status_code == 403

    @pytest.mark.parametrize(
        "body",
        [
            {"secret": "A" * 1001, "nonce": "n"},
            {"secret": "A" * 10_000, "nonce": "n"},
            {"secret": "A" * 51 + "\x00", "nonce": "n"},
            {"secret": "A" * 52 + "\n", "nonce": "n"},
            {"secret": 52, "nonce": "n"},
            {"secret": None, "nonce": "n"},
            {"nonce": "n"},
            {"secret": "A" * 52},
            {"secret": "A" * 52, "nonce": "n" * 10_240},
            {"secret": "A" * 52, "nonce": ""},
            {"secret": "A" * 52, "nonce": "a\x00b"},
            {"secret": "A" * 52, "nonce": "n", "event_id": "nope"},
            {"secret": "A" * 52, "nonce": "n", "extra": 1},
        ],
        ids=lambda body: ",".join(f"{k}:{len(str(v))}" for k, v in body.items()),
    )
    async def test_bad_input_is_400_and_changes_nothing(self, client, tenant, database, body):
        await admission(client, tenant)
        counts = await row_counts(database)
        response = await client.post("/v1/checkins", headers=tenant.w, json=body)
        assert response.status_code == 400, response.text
        assert list(response.json()) == ["errors"] and response.json()["errors"]
        assert await row_counts(database) == counts

    async def test_fifty_scans_at_once_check_a_single_use_ticket_in_once(
        self, client, tenant, database
    ):
        _, product, _, shown = await admission(client, tenant)
        answers = await asyncio.gather(*(scan(client, tenant, shown["secret"]) for _ in range(50)))
        codes = sorted(response.status_code for response in answers)
        assert codes == [200] + [409] * 49
        assert {r.json()["reason"] for r in answers if r.status_code == 409} == {
            "already_checked_in"
        }
        items = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        assert items.json()["items"][0]["redemption_count"] == 1
        assert (await row_counts(database))["checkins"] >= 50
        assert len(await of_type(client, tenant, "checkin.created")) == 1


class TestAnnul:
    async def test_scan_annul_rescan_leaves_one_check_in(self, client, tenant):
        event, product, ada, shown = await admission(client, tenant)
        ok = (await scan(client, tenant, shown["secret"], "first")).json()
        response = await annul(client, tenant, "first")
        assert response.status_code == 200, response.text
        annulled = response.json()
        assert annulled == {
            "status": "annulled",
            "nonce": "first",
            "item_id": 1,
            "product_id": product["id"],
            "annulled_at": annulled["annulled_at"],
            "redemption_count": 0,
            "checked_in_at": None,
        }
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] is None
        again = await annul(client, tenant, "first")  # idempotent
        assert (again.status_code, again.json()) == (200, annulled)
        rescan = await scan(client, tenant, shown["secret"], "second")
        assert rescan.status_code == 200
        assert rescan.json()["redemption_count"] == 1
        attendee = await attendee_of(client, tenant, event, ada)
        assert attendee["checked_in_at"] == rescan.json()["checked_in_at"]
        items = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        assert items.json()["items"][0]["redemption_count"] == 1
        [change] = await of_type(client, tenant, "checkin.annulled")
        assert change["data"] == annulled
        assert ok["checked_in_at"] <= rescan.json()["checked_in_at"]

    async def test_a_later_scan_keeps_its_check_in_time(self, client, tenant):
        event, _, ada, shown = await admission(client, tenant, redemption_quantity=3)
        await scan(client, tenant, shown["secret"], "a")
        await asyncio.sleep(1.1)
        later = (await scan(client, tenant, shown["secret"], "b")).json()
        annulled = (await annul(client, tenant, "a")).json()
        assert (annulled["redemption_count"], annulled["checked_in_at"]) == (
            1,
            later["checked_in_at"],
        )
        assert (await attendee_of(client, tenant, event, ada))["checked_in_at"] == later[
            "checked_in_at"
        ]

    async def test_a_nonce_never_scanned_or_refused_is_404(self, client, tenant):
        _, _, _, shown = await admission(client, tenant)
        await scan(client, tenant, shown["secret"], "ok")
        await scan(client, tenant, shown["secret"], "refused")
        for nonce in ("never", "refused"):
            response = await annul(client, tenant, nonce)
            assert response.status_code == 404
            assert response.json() == {"message": "no check-in was made with this nonce"}

    async def test_after_the_window_it_is_409(self, client, tenant, database):
        _, _, _, shown = await admission(client, tenant)
        await scan(client, tenant, shown["secret"], "old")
        async with orm.session(database) as session:
            await session.execute(
                update(Checkin).values(created_at=utcnow() - timedelta(seconds=901))
            )
            await session.commit()
        counts = await row_counts(database)
        response = await annul(client, tenant, "old")
        assert response.status_code == 409
        assert "can no longer be annulled" in response.json()["message"]
        assert await row_counts(database) == counts

    async def test_another_projects_nonce_is_404(self, client, tenant, other):
        _, _, _, shown = await admission(client, tenant)
        await scan(client, tenant, shown["secret"], "mine")
        response = await client.post("/v1/checkins/annul", headers=other.w, json={"nonce": "mine"})
        assert response.status_code == 404
        assert (await annul(client, tenant, "mine")).status_code == 200
