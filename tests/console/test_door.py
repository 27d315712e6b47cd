"""The console's door view through real HTTP: a scanned secret (what a keyboard-wedge scanner
types, then Enter) checks its ticket in through the API's use-case (``POST /v1/checkins``, for
this event only), as does an email, a reference id or an item id; the same form sent twice
counts once; the answer is said in words and colour; the last scans at this door are listed,
refused ones too; an ok scan can be undone inside the annul window, not after; a forged form
changes nothing."""

import base64
import html
import os
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from sqlalchemy import select, update

from tessera.models import Checkin, ProductItem
from tessera.models.base import utcnow
from tests import orm
from tests.factories import (
    create_event,
    create_product,
    create_user,
    door_key,
    issue_items,
    row_counts,
)

NONCE = re.compile(
    r'<form class="scan"[^>]*>\s*<input type="hidden" name="csrf" value="[^"]*">\s*'
    r'<input type="hidden" name="nonce" value="([^"]+)">'
)
RESULT = re.compile(
    r'<div id="door-result" class="door-result (\w+)" role="(\w+)">\s*'
    r'<p class="door-label">([^<]*)</p>\s*((?:<p>[^<]*</p>)*)'
)
ROW = re.compile(r'<tr class="(\w+)">(.*?)</tr>', re.S)
CELL = re.compile(r"<td>(.*?)</td>", re.S)
UNDO = re.compile(r'<input type="hidden" name="nonce" value="([^"]+)">\s*<button[^>]*>Undo')
NO_TICKET = "No ticket of this event for this email, reference id or item id"
REVOKED = (
    "This secret has been replaced (the ticket was reissued or passed on): ask the holder for "
    "the current one"
)
NO_SUCH = "No such ticket: not a ticket of this project"


class Result(NamedTuple):
    tone: str  # the colour: ok, warn, bad
    role: str
    label: str
    lines: list[str]


def door_of(tenant, event: dict) -> str:
    return f"/console/projects/{tenant.project_id}/events/{event['id']}/door"


def result_of(text: str) -> Result | None:
    found = RESULT.search(text)
    if found is None:
        return None
    tone, role, label, lines = found.groups()
    return Result(tone, role, html.unescape(label), html.unescape(lines)[3:-4].split("</p><p>"))


def scans_of(text: str) -> list[list[str]]:
    """The door's last scans: outcome, holder, ticket, source, and whether Undo is offered."""
    rows = []
    for _class, row in ROW.findall(text):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in CELL.findall(row)]
        rows.append([*cells[1:5], "undo" if "Undo" in cells[5] else ""])
    return rows


def named(user: dict) -> str:
    return f"{user['firstName']} {user['lastName']} ({user['email']})"


def shown(seconds: int) -> str:
    return f"{datetime.fromtimestamp(seconds, UTC):%Y-%m-%d %H:%M:%S} UTC"


def random_secret() -> str:
    """A well-formed secret that is no ticket's."""
    return base64.b32encode(os.urandom(32)).decode().rstrip("=")


async def nonce_of(console, path: str) -> str:
    page = await console.get(path)
    assert page.status_code == 200, page.text
    [nonce] = NONCE.findall(page.text)
    return nonce


async def scan(console, path: str, who: str, nonce: str | None = None):
    """The door's form sent as a scanner sends it: the page's own nonce, unless given."""
    nonce = nonce or await nonce_of(console, path)
    return await console.post(path, {"who": who, "nonce": nonce})


async def ticket(client, tenant, product: dict, number: int = 1) -> str:
    response = await client.get(
        f"/v1/products/{product['id']}/items/{number}/ticket", headers=tenant.r
    )
    assert response.status_code == 200, response.text
    return response.json()["secret"]


async def item(client, tenant, product: dict, number: int = 1) -> dict:
    response = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
    assert response.status_code == 200, response.text
    return next(i for i in response.json()["items"] if i["item_id"] == number)


async def attendee_of(client, tenant, event: dict, user: dict) -> dict | None:
    response = await client.get(f"/v1/events/{event['id']}/attendees", headers=tenant.r)
    assert response.status_code == 200, response.text
    return next((a for a in response.json()["attendees"] if a["user"]["id"] == user["id"]), None)


async def reputation(client, tenant, user: dict) -> int:
    response = await client.post(
        "/v1/users/reputation/history", headers=tenant.r, json={"id": user["id"]}
    )
    assert response.status_code == 200, response.text
    return response.json()["balance"]


async def checkins(database) -> list[Checkin]:
    async with orm.session(database, write=False) as session:
        return list((await session.scalars(select(Checkin).order_by(Checkin.created_at))).all())


async def admission(client, tenant, event: dict | None = None, **extra) -> tuple:
    """An event (or ``event``), a single-use admission to it, a user holding item 1, and its
    ticket's secret."""
    event = event or await create_event(client, tenant)
    product = await create_product(client, tenant, event_id=event["id"], **extra)
    user = await create_user(client, tenant)
    await issue_items(client, tenant, product["id"], user["id"])
    return event, product, user, await ticket(client, tenant, product)


class TestScan:
    async def test_the_door_page_is_one_focused_field_with_a_fresh_nonce(
        self, operator, tenant, client
    ):
        event = await create_event(client, tenant)
        path = door_of(tenant, event)
        door = await operator.get(path)
        assert door.status_code == 200
        assert (
            '<label for="door-who">Scan a ticket, or type an email, reference id or item id</label>'
        ) in door.text
        assert 'id="door-who" name="who"' in door.text and "autofocus" in door.text
        assert "<script" not in door.text
        assert result_of(door.text) is None and "No scan yet." in door.text
        first, second = await nonce_of(operator, path), await nonce_of(operator, path)
        assert first != second and len(first) >= 24

    async def test_a_scanned_secret_checks_the_holder_in(self, operator, tenant, client, database):
        event, product, user, secret = await admission(client, tenant)
        started = int(time.time())
        door = await scan(operator, door_of(tenant, event), secret)
        assert door.status_code == 200
        assert result_of(door.text) == Result(
            "ok", "status", "OK", [named(user), f"{product['name']}, item 1 · 0 of 1 use left"]
        )
        assert "autofocus" in door.text  # ready for the next one
        attendee = await attendee_of(client, tenant, event, user)
        assert attendee is not None
        assert started <= attendee["checked_in_at"] <= int(time.time())
        assert (await item(client, tenant, product))["redemption_count"] == 1
        assert await reputation(client, tenant, user) == 1  # a first check-in's point
        [recorded] = await checkins(database)
        assert (recorded.status, recorded.source, recorded.event_id) == (
            "ok",
            "console",
            uuid.UUID(event["id"]),
        )

    async def test_the_same_form_sent_again_counts_once(self, operator, tenant, client, database):
        event, product, _, secret = await admission(client, tenant, redemption_quantity=3)
        path = door_of(tenant, event)
        nonce = await nonce_of(operator, path)
        first = await scan(operator, path, secret, nonce)
        again = await scan(operator, path, secret, nonce)  # a reload, a double Enter
        assert first.status_code == again.status_code == 200
        assert result_of(first.text) == result_of(again.text)
        assert result_of(again.text).lines[1].endswith("item 1 · 2 of 3 uses left")
        assert (await item(client, tenant, product))["redemption_count"] == 1
        assert len(await checkins(database)) == 1
        # A new page, a new nonce: a second use.
        third = await scan(operator, path, secret)
        assert third.status_code == 200
        assert result_of(third.text).lines[1].endswith("item 1 · 1 of 3 uses left")

    async def test_a_second_scan_is_already_checked_in(self, operator, tenant, client):
        event, product, user, secret = await admission(client, tenant)
        path = door_of(tenant, event)
        assert (await scan(operator, path, secret)).status_code == 200
        checked_in_at = (await attendee_of(client, tenant, event, user))["checked_in_at"]
        again = await scan(operator, path, secret.lower())  # either case is the secret
        assert again.status_code == 409
        assert result_of(again.text) == Result(
            "warn",
            "alert",
            f"ALREADY CHECKED IN at {shown(checked_in_at)}",
            ["This ticket has been used already", named(user), f"{product['name']}, item 1"],
        )
        assert (await item(client, tenant, product))["redemption_count"] == 1

    async def test_a_ticket_of_another_event_is_wrong_event(self, operator, tenant, client):
        here = await create_event(client, tenant)
        there, product, user, secret = await admission(client, tenant)
        door = await scan(operator, door_of(tenant, here), secret)
        assert door.status_code == 409
        assert result_of(door.text) == Result(
            "bad",
            "alert",
            "WRONG EVENT",
            ["This ticket is for another event", named(user), f"{product['name']}, item 1"],
        )
        assert await attendee_of(client, tenant, there, user) is None
        assert await attendee_of(client, tenant, here, user) is None
        assert (await item(client, tenant, product))["redemption_count"] == 0

    async def test_a_ticket_whose_nft_is_held_outside_is_refused(
        self, operator, tenant, client, database
    ):
        event, product, user, secret = await admission(client, tenant)
        async with orm.session(database) as session:
            await session.execute(
                update(ProductItem)
                .where(ProductItem.product_id == uuid.UUID(product["id"]))
                .values(nft_status="external")
            )
            await session.commit()
        door = await scan(operator, door_of(tenant, event), secret)
        assert door.status_code == 409
        assert result_of(door.text) == Result(
            "bad",
            "alert",
            "HELD OUTSIDE",
            [
                "This ticket's NFT is held outside the project: it cannot be used until it "
                "comes back",
                named(user),
                f"{product['name']}, item 1",
            ],
        )
        assert await attendee_of(client, tenant, event, user) is None

    async def test_unknown_reissued_other_projects_and_garbage_are_unknown(
        self, operator, tenant, other, client, database
    ):
        event, product, user, secret = await admission(client, tenant)
        _, _, _, theirs = await admission(client, other)
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/1/ticket/reissue", headers=tenant.w
        )
        assert reissued.status_code == 200, reissued.text
        path = door_of(tenant, event)
        for who, said in (
            (random_secret(), NO_SUCH),
            (theirs, NO_SUCH),
            ("not a ticket at all", NO_TICKET),
            ("🎟️" * 40, NO_TICKET),
        ):
            door = await scan(operator, path, who)
            assert door.status_code == 404, who
            assert result_of(door.text) == Result("bad", "alert", "UNKNOWN", [said]), who
        door = await scan(operator, path, secret)  # reissued since
        assert door.status_code == 409
        assert result_of(door.text) == Result("bad", "alert", "REVOKED", [REVOKED]), secret
        assert (await item(client, tenant, product))["redemption_count"] == 0
        assert await attendee_of(client, tenant, event, user) is None
        statuses = sorted(c.status for c in await checkins(database))
        assert statuses == ["revoked"] + ["unknown"] * 4

    async def test_an_empty_field_or_a_form_without_nonce_changes_nothing(
        self, operator, tenant, client, database
    ):
        event, _, _, secret = await admission(client, tenant)
        path = door_of(tenant, event)
        before = await row_counts(database)
        empty = await scan(operator, path, "   ")
        assert empty.status_code == 400
        assert result_of(empty.text) == Result(
            "bad",
            "alert",
            "NOT CHECKED IN",
            ["Scan a ticket, or type an email, a reference id or an item id"],
        )
        unnamed = await operator.post(path, {"who": secret})
        assert unnamed.status_code == 400
        assert "This form has no scan id: reload the page and scan again" in unnamed.text
        too_long = await operator.post(path, {"who": secret, "nonce": "n" * 129})
        assert too_long.status_code == 400
        assert await row_counts(database) == before


class TestByName:
    async def test_an_email_goes_through_the_same_use_case(
        self, operator, tenant, client, database
    ):
        event, product, user, _ = await admission(client, tenant)
        path = door_of(tenant, event)
        door = await scan(operator, path, f" {user['email'].upper()} ")
        assert door.status_code == 200
        assert result_of(door.text) == Result(
            "ok", "status", "OK", [named(user), f"{product['name']}, item 1 · 0 of 1 use left"]
        )
        assert (await attendee_of(client, tenant, event, user))["checked_in_at"]
        [recorded] = await checkins(database)
        the_item = await item(client, tenant, product)
        assert (recorded.status, recorded.source, str(recorded.item_id)) == (
            "ok",
            "console",
            the_item["id"],
        )
        # The API's rule: the ticket is used.
        again = await scan(operator, path, user["email"])
        assert again.status_code == 409
        assert result_of(again.text).label.startswith("ALREADY CHECKED IN at ")

    async def test_a_reference_id_and_an_item_id(self, owner, tenant, client):
        event = await create_event(client, tenant)
        _, product, ada, _ = await admission(client, tenant, event)
        _, _, bob, _ = await admission(client, tenant, event)
        path = door_of(tenant, event)
        by_reference = await scan(owner, path, ada["referenceId"])
        assert by_reference.status_code == 200
        assert result_of(by_reference.text).lines[0] == named(ada)
        bobs = await issue_items(client, tenant, product["id"], bob["id"])
        by_item = await scan(owner, path, bobs[0]["id"])
        assert by_item.status_code == 200
        assert result_of(by_item.text).lines == [
            named(bob),
            f"{product['name']}, item 2 · 0 of 1 use left",
        ]

    async def test_a_persons_item_with_a_use_left_comes_first(self, operator, tenant, client):
        event, product, user, _ = await admission(client, tenant)
        await issue_items(client, tenant, product["id"], user["id"])
        path = door_of(tenant, event)
        first = await scan(operator, path, user["email"])
        second = await scan(operator, path, user["email"])
        assert first.status_code == second.status_code == 200
        assert result_of(first.text).lines[1].startswith(f"{product['name']}, item 1 · ")
        assert result_of(second.text).lines[1].startswith(f"{product['name']}, item 2 · ")
        assert (await scan(operator, path, user["email"])).status_code == 409

    async def test_an_item_of_another_event_is_wrong_event(self, operator, tenant, client):
        here = await create_event(client, tenant)
        _, product, _, _ = await admission(client, tenant)
        the_item = await item(client, tenant, product)
        door = await scan(operator, door_of(tenant, here), the_item["id"])
        assert door.status_code == 409
        assert result_of(door.text).label == "WRONG EVENT"

    async def test_a_person_without_a_ticket_of_this_event_is_unknown(
        self, operator, tenant, other, client, database
    ):
        """The old door registered and checked in anyone named; now a person needs a ticket of
        the event, as at the API."""
        event = await create_event(client, tenant)
        _, elsewhere, holder, _ = await admission(client, tenant)  # a ticket of another event
        guest = await create_user(client, tenant)
        registered = await client.post(
            "/v1/events/attendees/register",
            headers=tenant.w,
            json={"event_id": event["id"], "user_id": guest["id"]},
        )
        assert registered.status_code == 200, registered.text
        theirs = await create_user(client, other)
        _, their_product, _, _ = await admission(client, other)
        their_item = await item(client, other, their_product)
        path = door_of(tenant, event)
        for who, said in (
            (guest["email"], f"{named(guest)} holds no ticket of this event"),
            (holder["referenceId"], f"{named(holder)} holds no ticket of this event"),
            ("nobody@example.com", NO_TICKET),
            ("7d8c3f0e-0000-4000-8000-000000000000", NO_TICKET),
            (theirs["email"], NO_TICKET),
            (their_item["id"], NO_TICKET),
        ):
            door = await scan(operator, path, who)
            assert door.status_code == 404, who
            assert result_of(door.text) == Result("bad", "alert", "UNKNOWN", [said]), who
        assert (await attendee_of(client, tenant, event, guest))["checked_in_at"] is None
        assert (await item(client, tenant, elsewhere))["redemption_count"] == 0
        assert [c.status for c in await checkins(database)] == ["unknown"] * 6


class TestLastScans:
    async def test_lists_this_doors_scans_newest_first_refused_ones_too(
        self, operator, tenant, client
    ):
        event, product, ada, secret = await admission(client, tenant)
        _, bobs_product, bob, bobs_secret = await admission(client, tenant, event)
        there, there_product, cy, cys_secret = await admission(client, tenant)
        path = door_of(tenant, event)
        assert (await scan(operator, path, secret)).status_code == 200
        assert (await scan(operator, path, ada["email"])).status_code == 409
        assert (await scan(operator, path, cys_secret)).status_code == 409
        assert (await scan(operator, path, random_secret())).status_code == 404
        # An API scanner that names no event, of a ticket of this event: this door's too.
        api = await client.post(
            "/v1/checkins", headers=tenant.w, json={"secret": bobs_secret, "nonce": "api-1"}
        )
        assert api.status_code == 200, api.text
        # Another event's door: not this one's.
        elsewhere = await scan(operator, door_of(tenant, there), cys_secret)
        assert elsewhere.status_code == 200
        door = await operator.get(path)
        checked_in_at = (await attendee_of(client, tenant, event, ada))["checked_in_at"]
        adas, bobs = f"{product['name']}, item 1", f"{bobs_product['name']}, item 1"
        assert scans_of(door.text) == [
            ["OK", named(bob), bobs, "api", "undo"],
            ["UNKNOWN", "", "", "console", ""],
            ["WRONG EVENT", named(cy), f"{there_product['name']}, item 1", "console", ""],
            [f"ALREADY CHECKED IN at {shown(checked_in_at)}", named(ada), adas, "console", ""],
            ["OK", named(ada), adas, "console", "undo"],
        ]

    async def test_lists_the_tickets_admitted_twice_offline(self, app, operator, tenant, client):
        event, product, ada, secret = await admission(client, tenant)
        door = await door_key(app, tenant)
        path = door_of(tenant, event)
        assert "No conflict" in (await operator.get(path)).text
        now = datetime.now(UTC).replace(microsecond=0)
        for device, minutes, nonce in (("south", 2, "later"), ("north", 5, "earlier")):
            made = (now - timedelta(minutes=minutes)).isoformat()
            scanned = {"secret": secret, "nonce": nonce, "event_id": event["id"]}
            body = {"scans": [scanned | {"scanned_at": made, "device": device}]}
            uploaded = await client.post("/v1/checkins/batch", headers=door, json=body)
            assert uploaded.status_code == 200, uploaded.text
        text = (await operator.get(path)).text
        table = text[text.index('id="conflicts"') :]
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in CELL.findall(table)]
        # The later scan reached the server first; the earlier one took its use since.
        later = (now - timedelta(minutes=2)).strftime("%Y-%m-%d %H:%M:%S")
        assert cells == [later, "south", named(ada), f"{product['name']}, item 1", "earlier"]
        assert scans_of(text)[0][3].startswith("offline (north, scanned ")


class TestUndo:
    async def test_undo_inside_the_window_reverts_the_check_in(self, operator, tenant, client):
        event, product, user, secret = await admission(client, tenant)
        path = door_of(tenant, event)
        checked = await scan(operator, path, secret)
        assert checked.status_code == 200
        [nonce] = UNDO.findall(checked.text)
        assert f'Undo<span class="sr-only"> the check-in of {html.escape(named(user))} at ' in (
            checked.text
        )
        undone = await operator.post(f"{path}/undo", {"nonce": nonce})
        assert undone.status_code == 303
        assert undone.headers["location"].startswith(f"{path}?notice=")
        back = await operator.get(undone.headers["location"])
        assert (
            f'<p class="notice" role="status">Check-in undone: {html.escape(named(user))}, '
            f"{product['name']}, item 1.</p>"
        ) in back.text
        [row] = scans_of(back.text)
        assert row[0].startswith("OK, annulled at ") and row[4] == ""
        assert UNDO.findall(back.text) == []
        assert (await attendee_of(client, tenant, event, user))["checked_in_at"] is None
        assert (await item(client, tenant, product))["redemption_count"] == 0
        # Undone twice (a reload): the same, nothing more given back.
        again = await operator.post(f"{path}/undo", {"nonce": nonce})
        assert again.status_code == 303
        assert (await item(client, tenant, product))["redemption_count"] == 0
        rescan = await scan(operator, path, secret)
        assert rescan.status_code == 200 and result_of(rescan.text).label == "OK"

    async def test_no_undo_after_the_window(self, operator, tenant, client, database, app):
        event, product, user, secret = await admission(client, tenant)
        path = door_of(tenant, event)
        checked = await scan(operator, path, secret)
        [nonce] = UNDO.findall(checked.text)
        window = app.state.settings.checkin_annul_seconds
        async with orm.session(database) as session:
            await session.execute(
                update(Checkin).values(created_at=utcnow() - timedelta(seconds=window + 1))
            )
            await session.commit()
        door = await operator.get(path)
        assert UNDO.findall(door.text) == []
        assert scans_of(door.text)[0][0] == "OK" and scans_of(door.text)[0][4] == ""
        late = await operator.post(f"{path}/undo", {"nonce": nonce})  # a page left open
        assert late.status_code == 409
        assert result_of(late.text) == Result(
            "bad",
            "alert",
            "NOT UNDONE",
            ["This check-in can no longer be annulled: its window has passed"],
        )
        assert (await attendee_of(client, tenant, event, user))["checked_in_at"]
        assert (await item(client, tenant, product))["redemption_count"] == 1

    async def test_only_an_ok_scan_at_this_door_can_be_undone(self, operator, tenant, client):
        here = await create_event(client, tenant)
        there, product, _, secret = await admission(client, tenant)
        checked = await scan(operator, door_of(tenant, there), secret)
        [nonce] = UNDO.findall(checked.text)
        refused = await scan(operator, door_of(tenant, here), secret)
        [refused_nonce] = NONCE.findall(refused.text)  # the next form's: never scanned
        for other_nonce in (nonce, refused_nonce, "never-scanned"):
            wrong = await operator.post(f"{door_of(tenant, here)}/undo", {"nonce": other_nonce})
            assert wrong.status_code == 404, other_nonce
            assert result_of(wrong.text).label == "NOT UNDONE"
        assert (await item(client, tenant, product))["redemption_count"] == 1


class TestCsrf:
    async def test_a_forged_or_missing_token_is_403_and_changes_nothing(
        self, operator, tenant, client, database
    ):
        event, product, user, secret = await admission(client, tenant)
        path = door_of(tenant, event)
        checked = await scan(operator, path, secret)
        [nonce] = UNDO.findall(checked.text)
        before = await row_counts(database)
        next_nonce = await nonce_of(operator, path)
        for target, form in (
            (path, {"who": secret, "nonce": next_nonce}),
            (path, {"who": user["email"], "nonce": next_nonce}),
            (f"{path}/undo", {"nonce": nonce}),
        ):
            forged = await operator.http.post(target, data=form | {"csrf": "not-the-token"})
            missing = await operator.http.post(target, data=form)
            assert forged.status_code == missing.status_code == 403, target
        assert await row_counts(database) == before
        assert (await item(client, tenant, product))["redemption_count"] == 1
        assert [c.annulled_at for c in await checkins(database)] == [None]
