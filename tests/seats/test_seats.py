"""Seating plans, seated products, holds and the sale of held seats, through the API on the test
database (SQLite or PostgreSQL): what docs/api.md ("Seats") promises, each refusal with what it
names and what it leaves unchanged."""

import asyncio
from typing import Any

import httpx
import pytest

from tests.factories import (
    Tenant,
    create_event,
    create_product,
    create_user,
    door_key,
    transfer_item,
)

Plan = dict[str, Any]


def plan_of(*areas: tuple[str, list[tuple[str, int, str | None]]]) -> Plan:
    """A plan: areas of rows ``(name, seats, category)``, seats numbered 1..n."""
    return {
        "areas": [
            {
                "name": area,
                "rows": [
                    {
                        "name": row,
                        "seats": [
                            {"number": str(n), "x": n * 10, "y": r * 10}
                            | ({"category": category} if category is not None else {})
                            for n in range(1, count + 1)
                        ],
                    }
                    for r, (row, count, category) in enumerate(rows)
                ],
            }
            for area, rows in areas
        ]
    }


async def put_plan(client: httpx.AsyncClient, tenant: Tenant, event_id: str, plan: Plan) -> Plan:
    answer = await client.put(f"/v1/events/{event_id}/seating", headers=tenant.w, json=plan)
    assert answer.status_code == 200, answer.text
    result: Plan = answer.json()
    return result


def seat_ids(plan: Plan) -> dict[tuple[str, str, str], str]:
    """(area, row, number) -> the seat's id, from a plan as answered."""
    return {
        (area["name"], row["name"], seat["number"]): seat["id"]
        for area in plan["areas"]
        for row in area["rows"]
        for seat in row["seats"]
    }


def names(seats: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(seat["area"], seat["row"], seat["number"]) for seat in seats]


async def statuses(
    client: httpx.AsyncClient, tenant: Tenant, event_id: str, **query: str
) -> dict[tuple[str, str, str], str]:
    answer = await client.get(f"/v1/events/{event_id}/seats", headers=tenant.r, params=query)
    assert answer.status_code == 200, answer.text
    return {(s["area"], s["row"], s["number"]): s["status"] for s in answer.json()["seats"]}


async def hold(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> httpx.Response:
    return await client.post("/v1/seat-holds", headers=tenant.w, json=body)


@pytest.fixture
async def theatre(client: httpx.AsyncClient, tenant: Tenant) -> dict[str, Any]:
    """An event with a plan of two areas (Stalls A-B front, C back; Balcony A back) and a
    product of each category."""
    event = await create_event(client, tenant)
    plan = await put_plan(
        client,
        tenant,
        event["id"],
        plan_of(
            ("Stalls", [("A", 6, "front"), ("B", 6, "front"), ("C", 4, "back")]),
            ("Balcony", [("A", 4, "back")]),
        ),
    )
    front = await create_product(
        client, tenant, event_id=event["id"], seat_category="front", is_transferable=True
    )
    back = await create_product(client, tenant, event_id=event["id"], seat_category="back")
    return {"event": event, "plan": plan, "ids": seat_ids(plan), "front": front, "back": back}


async def test_a_plan_of_three_areas_and_2000_seats_is_stored_and_read_back_exactly(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    event = await create_event(client, tenant)
    plan = plan_of(
        ("Stalls", [(f"R{r}", 40, "front" if r < 10 else "back") for r in range(25)]),
        ("Circle", [(f"C{r}", 50, "circle") for r in range(12)]),
        ("Boxes", [(f"B{r}", 25, None) for r in range(16)]),
    )
    stored = await put_plan(client, tenant, event["id"], plan)
    assert stored["seat_count"] == 1000 + 600 + 400 == 2000
    # The plan as sent, every seat with an id of its own.
    without_ids = {
        "areas": [
            {
                "name": area["name"],
                "rows": [
                    {
                        "name": row["name"],
                        "seats": [{k: v for k, v in s.items() if k != "id"} for s in row["seats"]],
                    }
                    for row in area["rows"]
                ],
            }
            for area in stored["areas"]
        ]
    }
    assert without_ids == plan
    assert stored["areas"][0]["rows"][0]["seats"][0] == {
        "id": stored["areas"][0]["rows"][0]["seats"][0]["id"],
        "number": "1",
        "category": "front",
        "x": 10,
        "y": 0,
    }
    assert type(stored["areas"][0]["rows"][0]["seats"][0]["x"]) is int  # 10, not 10.0
    # What a seat was not sent with, it is read back without.
    assert set(stored["areas"][2]["rows"][0]["seats"][0]) == {"id", "number", "x", "y"}
    assert len(set(seat_ids(stored).values())) == 2000
    read = await client.get(f"/v1/events/{event['id']}/seating", headers=tenant.r)
    assert read.status_code == 200 and read.json() == stored
    # Sent again, each seat keeps its id.
    assert await put_plan(client, tenant, event["id"], plan) == stored
    # A seated product's stock is its category's seats.
    front = await create_product(client, tenant, event_id=event["id"], seat_category="front")
    assert (front["stock"], front["seat_category"]) == (400, "front")
    too_many = await client.post(
        "/v1/products",
        headers=tenant.w,
        json={"type": "admission", "name": "x", "event_id": event["id"], "seat_category": "circle"}
        | {"stock": 601},
    )
    assert too_many.status_code == 409
    assert too_many.json() == {
        "message": "stock cannot be 601: the event has 600 seats of category 'circle'"
    }


async def test_a_plan_is_refused_whole_for_names_twice_or_too_many_seats(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    event = await create_event(client, tenant)
    path = f"/v1/events/{event['id']}/seating"
    twice = plan_of(("Stalls", [("A", 2, None), ("A", 1, None)]), ("Stalls", [("B", 1, None)]))
    twice["areas"][1]["rows"][0]["seats"].append({"number": "1"})
    answer = await client.put(path, headers=tenant.w, json=twice)
    assert answer.status_code == 400
    [problem] = answer.json()["errors"]
    assert "'Stalls' is named twice" in problem
    assert "row 'A' of 'Stalls' is named twice" in problem
    assert "seat '1' of row 'B' of 'Stalls' is named twice" in problem
    rows = [
        {"name": f"R{r}", "seats": [{"number": str(n)} for n in range(1000)]} for r in range(50)
    ]
    huge = {
        "areas": [{"name": "Arena", "rows": [*rows, {"name": "Z", "seats": [{"number": "1"}]}]}]
    }
    answer = await client.put(path, headers=tenant.w, json=huge)
    assert answer.status_code == 400
    assert "at most 50000 seats in a plan, got 50001" in answer.json()["errors"][0]
    # Nothing was stored; 50,000 is not too many.
    assert (await client.get(path, headers=tenant.r)).json()["seat_count"] == 0
    huge["areas"][0]["rows"].pop()
    assert (await put_plan(client, tenant, event["id"], huge))["seat_count"] == 50_000


async def test_seated_products_need_a_plan_with_their_category(
    client: httpx.AsyncClient, tenant: Tenant, theatre: dict[str, Any]
) -> None:
    assert (theatre["front"]["stock"], theatre["back"]["stock"]) == (12, 8)
    body = {"type": "admission", "name": "Gallery", "seat_category": "gallery"}
    answer = await client.post("/v1/products", headers=tenant.w, json=body)
    assert answer.status_code == 400
    assert answer.json() == {
        "errors": ["event_id: a seated product (seat_category) is for an event"]
    }
    answer = await client.post(
        "/v1/products", headers=tenant.w, json=body | {"event_id": theatre["event"]["id"]}
    )
    assert answer.status_code == 409
    assert answer.json() == {
        "message": "the event's seating plan has no seats of category 'gallery'"
    }
    # A seated product is sold through holds: no claim link gives its seats away.
    claimable = await create_product(
        client,
        tenant,
        event_id=theatre["event"]["id"],
        seat_category="back",
        is_claimable=True,
    )
    link = await client.post(
        f"/v1/products/{claimable['id']}/claim-links", headers=tenant.w, json={"max_claims": 1}
    )
    assert link.status_code == 409
    assert link.json() == {
        "message": "a seated product is sold through seat holds (POST /v1/seat-holds), not claimed"
    }
    # A product without seat_category answers as it always did.
    plain = await create_product(client, tenant, event_id=theatre["event"]["id"])
    assert "seat_category" not in plain


async def test_holds_by_seat_and_best_together_and_what_they_refuse(
    client: httpx.AsyncClient, tenant: Tenant, theatre: dict[str, Any]
) -> None:
    ids, front, event_id = theatre["ids"], theatre["front"], theatre["event"]["id"]
    first = await hold(client, tenant, product_id=front["id"], seats=[ids["Stalls", "A", "3"]])
    assert first.status_code == 201, first.text
    held = first.json()
    assert set(held) == {"id", "product_id", "seats", "expires_at"}
    assert names(held["seats"]) == [("Stalls", "A", "3")]
    # The best 3 together: row A is broken at 3, so 4-5-6 (the front row first).
    best = await hold(client, tenant, product_id=front["id"], count=3)
    assert best.status_code == 201, best.text
    assert names(best.json()["seats"]) == [("Stalls", "A", n) for n in ("4", "5", "6")]
    # Then 3 more: 1-2 are two, so row B.
    more = await hold(client, tenant, product_id=front["id"], count=3, together=True)
    assert names(more.json()["seats"]) == [("Stalls", "B", n) for n in ("1", "2", "3")]
    # A held seat refuses a second hold, naming it; nothing else is held.
    before = await statuses(client, tenant, event_id)
    twice = await hold(
        client,
        tenant,
        product_id=front["id"],
        seats=[ids["Stalls", "A", "1"], ids["Stalls", "A", "4"]],
    )
    assert twice.status_code == 409
    assert twice.json() == {"message": "seats not available: Stalls A-4 (held)"}
    assert await statuses(client, tenant, event_id) == before
    # Four together do not exist any more in front (A1-2, B4-6 are left).
    four = await hold(client, tenant, product_id=front["id"], count=4)
    assert four.status_code == 409
    assert four.json() == {
        "message": "no 4 seats of category 'front' are available side by side in one row "
        "(5 available in all)"
    }
    apart = await hold(client, tenant, product_id=front["id"], count=4, together=False)
    assert names(apart.json()["seats"]) == [
        ("Stalls", "A", "1"),
        ("Stalls", "A", "2"),
        ("Stalls", "B", "4"),
        ("Stalls", "B", "5"),
    ]
    # A seat of another category, one of another event, a product that sells no seats.
    other = await hold(client, tenant, product_id=front["id"], seats=[ids["Balcony", "A", "1"]])
    assert other.status_code == 409
    assert other.json()["message"] == (
        f"not seats of category 'front', which product {front['id']} sells: Balcony A-1"
    )
    plain = await create_product(client, tenant, event_id=event_id)
    answer = await hold(client, tenant, product_id=plain["id"], count=1)
    assert answer.status_code == 400
    assert answer.json() == {
        "errors": [f"product_id: product {plain['id']} sells no seats (no seat_category)"]
    }
    assert (await hold(client, tenant, product_id=front["id"])).status_code == 400
    # A product whose stock is less than its seats holds no more than the stock can sell.
    few = await create_product(
        client, tenant, event_id=event_id, seat_category="back", stock=2, name="Few"
    )
    answer = await hold(client, tenant, product_id=few["id"], count=3)
    assert answer.status_code == 409
    assert answer.json() == {"message": "product is out of stock: 2 left, 3 requested"}
    counted = await statuses(client, tenant, event_id, product_id=front["id"], status="held")
    assert len(counted) == 11


async def test_an_expired_hold_frees_its_seats_at_once_and_a_released_one_too(
    client: httpx.AsyncClient, tenant: Tenant, theatre: dict[str, Any]
) -> None:
    ids, back, event_id = theatre["ids"], theatre["back"], theatre["event"]["id"]
    seat = ids["Stalls", "C", "1"]
    short = await hold(client, tenant, product_id=back["id"], seats=[seat], seconds=1)
    assert short.status_code == 201
    assert short.json()["expires_at"] > 0
    refused = await hold(client, tenant, product_id=back["id"], seats=[seat])
    assert refused.status_code == 409
    await asyncio.sleep(2.1)  # the hold ends at its second, with nothing run meanwhile
    assert (await statuses(client, tenant, event_id))["Stalls", "C", "1"] == "available"
    again = await hold(client, tenant, product_id=back["id"], seats=[seat])
    assert again.status_code == 201
    # The expired hold sells nothing any more.
    user = await create_user(client, tenant)
    order = await client.post(
        "/v1/orders",
        headers=tenant.w,
        json={
            "user": {"id": user["id"]},
            "items": [{"product_id": back["id"], "quantity": 1, "hold_id": short.json()["id"]}],
        },
    )
    assert order.status_code == 409
    assert order.json() == {
        "message": f"seat hold {short.json()['id']} expired; its seats are free again"
    }
    released = await client.delete(f"/v1/seat-holds/{again.json()['id']}", headers=tenant.w)
    assert released.status_code == 204
    assert (await statuses(client, tenant, event_id))["Stalls", "C", "1"] == "available"
    gone = await client.delete(
        "/v1/seat-holds/00000000-0000-7000-8000-000000000000", headers=tenant.w
    )
    assert gone.status_code == 404


async def test_an_order_with_the_hold_gets_the_seats_which_every_answer_shows(
    app: Any, client: httpx.AsyncClient, tenant: Tenant, theatre: dict[str, Any]
) -> None:
    front, event_id = theatre["front"], theatre["event"]["id"]
    user = await create_user(client, tenant)
    held = (await hold(client, tenant, product_id=front["id"], count=2)).json()
    line = {"product_id": front["id"], "quantity": 2}
    # Without the hold: 400 naming hold_id; with a quantity other than its seats: 400.
    for sent, problem in (
        (
            line,
            f"hold_id: product {front['id']} sells seats (seat_category 'front'): hold them "
            "first (POST /v1/seat-holds) and send the hold's id",
        ),
        (
            line | {"quantity": 3, "hold_id": held["id"]},
            f"hold_id: seat hold {held['id']} keeps 2 seats; 3 are asked for",
        ),
    ):
        answer = await client.post(
            "/v1/orders", headers=tenant.w, json={"user": {"id": user["id"]}, "items": [sent]}
        )
        assert answer.status_code == 400, answer.text
        assert answer.json() == {"errors": [problem]}
    order = await client.post(
        "/v1/orders",
        headers=tenant.w,
        json={"user": {"id": user["id"]}, "items": [line | {"hold_id": held["id"]}]},
    )
    assert order.status_code == 201, order.text
    items = order.json()["product_items"]
    assert [item["seat"] for item in items] == held["seats"]
    # The same seat in the item's own answer, the user's items, and the door's sync.
    item = items[0]
    path = f"/v1/products/{front['id']}/items/{item['item_id']}"
    assert (await client.get(path, headers=tenant.r)).json()["seat"] == held["seats"][0]
    ticket = (await client.get(f"{path}/ticket", headers=tenant.r)).json()
    page = await client.get(httpx.URL(ticket["url"]).path)
    assert page.status_code == 200
    assert '<dd id="seat">Stalls, row A, seat 1</dd>' in page.text
    door = await door_key(app, tenant)
    synced = await client.get("/v1/checkins/sync", headers=door, params={"event_id": event_id})
    assert synced.status_code == 200, synced.text
    assert sorted(t["seat"]["id"] for t in synced.json()["tickets"]) == sorted(
        seat["id"] for seat in held["seats"]
    )
    sold = await statuses(client, tenant, event_id, status="sold")
    assert sorted(sold) == sorted(names(held["seats"]))
    # The hold is over: it sells nothing twice, and it cannot be released.
    again = await client.post(
        "/v1/orders",
        headers=tenant.w,
        json={"user": {"id": user["id"]}, "items": [line | {"hold_id": held["id"]}]},
    )
    assert again.status_code == 409
    assert again.json() == {"message": f"seat hold {held['id']} has ended: sold"}
    release = await client.delete(f"/v1/seat-holds/{held['id']}", headers=tenant.w)
    assert release.status_code == 409
    # A transfer keeps the seat.
    other = await create_user(client, tenant)
    moved = await transfer_item(client, tenant, front["id"], item["id"], user, other)
    assert moved.status_code == 200, moved.text
    assert (await client.get(path, headers=tenant.r)).json()["seat"] == held["seats"][0]
    # A sold seat cannot be blocked, nor left out of a new plan.
    seat_id = held["seats"][0]["id"]
    blocked = await client.patch(
        f"/v1/events/{event_id}/seats/{seat_id}", headers=tenant.w, json={"blocked": True}
    )
    assert blocked.status_code == 409
    assert blocked.json() == {
        "message": "seat Stalls A-1 is sold: only an available or blocked seat is blocked or "
        "unblocked"
    }
    smaller = plan_of(
        ("Stalls", [("B", 6, "front"), ("C", 4, "back")]), ("Balcony", [("A", 4, "back")])
    )
    answer = await client.put(f"/v1/events/{event_id}/seating", headers=tenant.w, json=smaller)
    assert answer.status_code == 409
    assert answer.json() == {
        "message": "the plan leaves out seats that are sold or held: Stalls A-1, Stalls A-2"
    }
    # ... nor given another category: its item is a product's that sells "front".
    recategorised = plan_of(
        ("Stalls", [("A", 6, "back"), ("B", 6, "front"), ("C", 4, "back")]),
        ("Balcony", [("A", 4, "back")]),
    )
    answer = await client.put(
        f"/v1/events/{event_id}/seating", headers=tenant.w, json=recategorised
    )
    assert answer.status_code == 409
    assert answer.json() == {
        "message": "the plan changes the category of seats that are sold or held: "
        "Stalls A-1, Stalls A-2"
    }


async def test_items_with_a_hold_and_a_pending_order_that_keeps_or_frees_its_seats(
    client: httpx.AsyncClient, tenant: Tenant, theatre: dict[str, Any]
) -> None:
    back, event_id = theatre["back"], theatre["event"]["id"]
    ada, bob = await create_user(client, tenant), await create_user(client, tenant)
    held = (await hold(client, tenant, product_id=back["id"], count=2)).json()
    issued = await client.post(
        f"/v1/products/{back['id']}/items",
        headers=tenant.w,
        json={"users": [ada["id"], bob["id"]], "hold_id": held["id"]},
    )
    assert issued.status_code == 201, issued.text
    assert [(i["user"]["id"], i["seat"]) for i in issued.json()["items"]] == [
        (ada["id"], held["seats"][0]),
        (bob["id"], held["seats"][1]),
    ]
    # A pending order keeps its seats past the hold's time, until it ends.
    kept = (await hold(client, tenant, product_id=back["id"], count=1, seconds=1)).json()
    body = {
        "user": {"id": ada["id"]},
        "status": "pending",
        "items": [{"product_id": back["id"], "quantity": 1, "hold_id": kept["id"]}],
    }
    pending = await client.post("/v1/orders", headers=tenant.w, json=body)
    assert pending.status_code == 201, pending.text
    await asyncio.sleep(2.1)
    seat = tuple(names(kept["seats"])[0])
    assert (await statuses(client, tenant, event_id))[seat] == "held"
    release = await client.delete(f"/v1/seat-holds/{kept['id']}", headers=tenant.w)
    assert release.status_code == 409
    cancelled = await client.post(f"/v1/orders/{pending.json()['id']}/cancel", headers=tenant.w)
    assert cancelled.status_code == 200, cancelled.text
    assert (await statuses(client, tenant, event_id))[seat] == "available"
    # Completed, it sells them.
    kept = (await hold(client, tenant, product_id=back["id"], count=1)).json()
    pending = await client.post(
        "/v1/orders",
        headers=tenant.w,
        json=body | {"items": [{"product_id": back["id"], "quantity": 1, "hold_id": kept["id"]}]},
    )
    completed = await client.post(f"/v1/orders/{pending.json()['id']}/complete", headers=tenant.w)
    assert completed.status_code == 200, completed.text
    [item] = completed.json()["product_items"]
    assert item["seat"] == kept["seats"][0]


async def test_blocking_and_another_project(
    client: httpx.AsyncClient, tenant: Tenant, other: Tenant, theatre: dict[str, Any]
) -> None:
    ids, front, event_id = theatre["ids"], theatre["front"], theatre["event"]["id"]
    seat = ids["Stalls", "A", "1"]
    path = f"/v1/events/{event_id}/seats/{seat}"
    blocked = await client.patch(path, headers=tenant.w, json={"blocked": True})
    assert blocked.status_code == 200, blocked.text
    assert blocked.json()["status"] == "blocked"
    refused = await hold(client, tenant, product_id=front["id"], seats=[seat])
    assert refused.json() == {"message": "seats not available: Stalls A-1 (blocked)"}
    best = (await hold(client, tenant, product_id=front["id"], count=2)).json()
    assert names(best["seats"]) == [("Stalls", "A", "2"), ("Stalls", "A", "3")]
    unblocked = await client.patch(path, headers=tenant.w, json={"blocked": False})
    assert unblocked.json()["status"] == "available"
    assert (await client.patch(path, headers=tenant.r, json={"blocked": True})).status_code == 403
    # Another project sees none of it, and changes none of it.
    for answer in (
        await client.get(f"/v1/events/{event_id}/seating", headers=other.r),
        await client.get(f"/v1/events/{event_id}/seats", headers=other.r),
        await client.patch(path, headers=other.w, json={"blocked": True}),
        await client.delete(f"/v1/seat-holds/{best['id']}", headers=other.w),
        await hold(client, other, product_id=front["id"], count=1),
    ):
        assert answer.status_code == 404, answer.text
    assert (await statuses(client, tenant, event_id))["Stalls", "A", "1"] == "available"


async def test_the_best_seats_are_found_across_the_pages_they_are_read_in(
    client: httpx.AsyncClient, tenant: Tenant, theatre: dict[str, Any], monkeypatch
) -> None:
    """Available seats are read from the front a page at a time: a run of seats that goes on
    from one page to the next is found whole."""
    from tessera.seats import rules

    monkeypatch.setattr(rules, "_PAGE", 2)
    ids, front, event_id = theatre["ids"], theatre["front"], theatre["event"]["id"]
    blocked = await client.patch(
        f"/v1/events/{event_id}/seats/{ids['Stalls', 'A', '2']}",
        headers=tenant.w,
        json={"blocked": True},
    )
    assert blocked.status_code == 200
    # Pages: [A1, A3], [A4, A5], [A6, B1]...: A3-A4-A5 starts in the first page.
    three = await hold(client, tenant, product_id=front["id"], count=3)
    assert names(three.json()["seats"]) == [("Stalls", "A", n) for n in ("3", "4", "5")]
    apart = await hold(client, tenant, product_id=front["id"], count=4, together=False)
    assert names(apart.json()["seats"]) == [
        ("Stalls", "A", "1"),
        ("Stalls", "A", "6"),
        ("Stalls", "B", "1"),
        ("Stalls", "B", "2"),
    ]
    too_many = await hold(client, tenant, product_id=front["id"], count=5)
    assert too_many.json() == {
        "message": "no 5 seats of category 'front' are available side by side in one row "
        "(4 available in all)"
    }


async def test_an_event_deleted_takes_its_plan_holds_and_unsold_seated_products(
    client: httpx.AsyncClient, tenant: Tenant, theatre: dict[str, Any]
) -> None:
    front, event_id = theatre["front"], theatre["event"]["id"]
    held = await hold(client, tenant, product_id=front["id"], count=2)
    assert held.status_code == 201
    deleted = await client.delete(f"/v1/events/{event_id}", headers=tenant.w)
    assert deleted.status_code == 204, deleted.text
    assert (await client.get(f"/v1/events/{event_id}/seating", headers=tenant.r)).status_code == 404
    assert (await client.get(f"/v1/products/{front['id']}", headers=tenant.r)).status_code == 404
    released = await client.delete(f"/v1/seat-holds/{held.json()['id']}", headers=tenant.w)
    assert released.status_code == 404


async def test_a_seated_products_category_and_event_stay_while_its_seats_are_taken(
    client: httpx.AsyncClient, tenant: Tenant, theatre: dict[str, Any]
) -> None:
    front, back = theatre["front"], theatre["back"]
    other = await create_event(client, tenant)
    path = f"/v1/products/{front['id']}"
    held = (await hold(client, tenant, product_id=front["id"], count=1)).json()
    for change in ({"seat_category": "back"}, {"event_id": other["id"]}):
        answer = await client.patch(path, headers=tenant.w, json=change)
        assert answer.status_code == 409, answer.text
        assert answer.json() == {
            "message": f"{next(iter(change))} cannot change while seats are held for the "
            "product (1 holds)"
        }
    released = await client.delete(f"/v1/seat-holds/{held['id']}", headers=tenant.w)
    assert released.status_code == 204
    # Free again: it becomes a product of the back seats, with their number as its stock.
    moved = await client.patch(path, headers=tenant.w, json={"seat_category": "back"})
    assert moved.status_code == 200, moved.text
    assert (moved.json()["seat_category"], moved.json()["stock"]) == ("back", 8)
    # Once an item is issued, neither moves.
    user = await create_user(client, tenant)
    sold = (await hold(client, tenant, product_id=back["id"], count=1)).json()
    issued = await client.post(
        f"/v1/products/{back['id']}/items",
        headers=tenant.w,
        json={"users": [user["id"]], "hold_id": sold["id"]},
    )
    assert issued.status_code == 201, issued.text
    answer = await client.patch(
        f"/v1/products/{back['id']}", headers=tenant.w, json={"seat_category": "front"}
    )
    assert answer.json() == {
        "message": "seat_category cannot change: items were already issued (1)"
    }
