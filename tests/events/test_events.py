import time
import uuid

import pytest

from tests.factories import (
    create_event,
    create_order,
    create_product,
    create_user,
    event_body,
    issue_items,
)

EVENT_KEYS = {
    "id",
    "created_at",
    "updated_at",
    "name",
    "start_date",
    "end_date",
    "location",
    "address",
    "project_id",
    "reference_id",
    "description",
}


class TestCreateEvent:
    async def test_needs_write(self, client, tenant):
        assert (await client.post("/v1/events/create", json=event_body())).status_code == 401
        assert (
            await client.post("/v1/events/create", headers=tenant.r, json=event_body())
        ).status_code == 403

    async def test_creates(self, client, tenant):
        body = event_body()
        response = await client.post("/v1/events/create", headers=tenant.w, json=body)
        assert response.status_code == 201
        event = response.json()
        assert set(event) == EVENT_KEYS
        assert {k: event[k] for k in body} == body
        assert event["project_id"] == str(tenant.project_id)
        assert event["created_at"] == event["updated_at"]

    @pytest.mark.parametrize(
        ("override", "error"),
        [
            ({"name": "ab"}, "name: String should have at least 3 characters"),
            ({"name": "x" * 256}, "name: String should have at most 255 characters"),
            ({"start_date": 0}, "start_date: Input should be greater than 0"),
            ({"start_date": "1700000000"}, "start_date: Input should be a valid integer"),
            ({"end_date": 1}, "end_date: must not be before start_date"),
            ({"location": ""}, "location: String should have at least 1 character"),
            ({"location": "x" * 129}, "location: String should have at most 128 characters"),
            ({"address": "x" * 256}, "address: String should have at most 255 characters"),
            ({"reference_id": ""}, "reference_id: String should have at least 1 character"),
        ],
    )
    async def test_invalid_is_400(self, client, tenant, override, error):
        response = await client.post(
            "/v1/events/create", headers=tenant.w, json=event_body(**override)
        )
        assert response.status_code == 400 and error in response.json()["errors"], response.json()

    async def test_missing_fields_are_named(self, client, tenant):
        response = await client.post("/v1/events/create", headers=tenant.w, json={})
        assert response.status_code == 400
        assert set(response.json()["errors"]) == {
            f"{f}: field required"
            for f in ("name", "start_date", "end_date", "location", "address")
        }

    async def test_duplicate_reference_id_is_409(self, client, tenant, other):
        await create_event(client, tenant, reference_id="gala")
        await create_event(client, other, reference_id="gala")  # other projects are separate
        response = await client.post(
            "/v1/events/create", headers=tenant.w, json=event_body(reference_id="gala")
        )
        assert response.status_code == 409
        assert response.json() == {"message": "reference_id already used by another event: 'gala'"}


class TestGetAndListEvents:
    async def test_needs_a_credential(self, client, tenant):
        event = await create_event(client, tenant)
        assert (await client.get(f"/v1/events/{event['id']}")).status_code == 401
        assert (await client.get("/v1/events")).status_code == 401

    async def test_by_id_or_reference(self, client, tenant):
        event = await create_event(client, tenant, reference_id="summer-2026")
        for key in (event["id"], "summer-2026"):
            response = await client.get(f"/v1/events/{key}", headers=tenant.r)
            assert response.status_code == 200 and response.json() == event

    async def test_id_wins_over_a_reference_that_looks_like_an_id(self, client, tenant):
        first = await create_event(client, tenant)
        second = await create_event(client, tenant, reference_id=first["id"])
        assert (await client.get(f"/v1/events/{first['id']}", headers=tenant.r)).json()[
            "id"
        ] == first["id"]
        assert second["reference_id"] == first["id"]

    async def test_another_projects_event_is_404(self, client, tenant, other):
        theirs = await create_event(client, other, reference_id="theirs")
        for key in (theirs["id"], "theirs", str(uuid.uuid4())):
            response = await client.get(f"/v1/events/{key}", headers=tenant.r)
            assert response.status_code == 404 and response.json() == {"message": "event not found"}

    async def test_overlong_key_is_400(self, client, tenant):
        response = await client.get(f"/v1/events/{'x' * 256}", headers=tenant.r)
        assert response.status_code == 400
        assert response.json()["errors"] == [
            "IdOrReferenceId: String should have at most 255 characters"
        ]

    async def test_list_pages(self, client, tenant, other):
        events = [await create_event(client, tenant) for _ in range(3)]
        await create_event(client, other)
        response = await client.get("/v1/events", headers=tenant.r, params={"page": 2, "limit": 2})
        assert response.status_code == 200
        assert response.json() == {
            "events": [events[2]],
            "pagination": {"page": 2, "limit": 2, "total": 3},
        }
        default = (await client.get("/v1/events", headers=tenant.r)).json()
        assert default["pagination"] == {"page": 1, "limit": 20, "total": 3}

    @pytest.mark.parametrize(
        ("params", "error"),
        [
            ({"page": 0}, "page: Input should be greater than or equal to 1"),
            ({"limit": 0}, "limit: Input should be greater than or equal to 1"),
            ({"limit": 101}, "limit: Input should be less than or equal to 100"),
            (
                {"page": "x"},
                "page: Input should be a valid integer, unable to parse string as an integer",
            ),
        ],
    )
    async def test_list_bounds_are_400(self, client, tenant, params, error):
        response = await client.get("/v1/events", headers=tenant.r, params=params)
        assert response.status_code == 400 and response.json() == {"errors": [error]}


class TestUpdateEvent:
    async def test_needs_write(self, client, tenant):
        event = await create_event(client, tenant)
        body = {"id": event["id"], "name": "New name"}
        assert (await client.put("/v1/events/update", json=body)).status_code == 401
        assert (
            await client.put("/v1/events/update", headers=tenant.r, json=body)
        ).status_code == 403

    async def test_updates_only_given_fields(self, client, tenant):
        event = await create_event(client, tenant, reference_id="old-ref")
        response = await client.put(
            "/v1/events/update",
            headers=tenant.w,
            json={"reference_id": "old-ref", "name": "Renamed"},
        )
        assert response.status_code == 200
        updated = response.json()
        assert updated["name"] == "Renamed" and updated["reference_id"] == "old-ref"
        assert {k: v for k, v in updated.items() if k not in {"name", "updated_at"}} == {
            k: v for k, v in event.items() if k not in {"name", "updated_at"}
        }
        assert updated["updated_at"] > event["updated_at"]
        by_id = await client.put(
            "/v1/events/update",
            headers=tenant.w,
            json={"id": event["id"], "reference_id": "new-ref", "description": None},
        )
        assert by_id.json()["reference_id"] == "new-ref" and by_id.json()["description"] is None

    async def test_rules(self, client, tenant, other):
        event = await create_event(client, tenant)
        taken = await create_event(client, tenant)
        theirs = await create_event(client, other)
        cases = [
            ({"name": "Valid name"}, 400, {"errors": ["one of id or reference_id is required"]}),
            ({"id": event["id"], "name": None}, 400, {"errors": ["name may not be null"]}),
            (
                {"id": event["id"], "start_date": 20, "end_date": 10},
                400,
                {"errors": ["end_date: must not be before start_date"]},
            ),
            (
                {"id": event["id"], "end_date": event["start_date"] - 1},
                409,
                {
                    "message": f"the event would end ({event['start_date'] - 1}) before it "
                    f"starts ({event['start_date']}): send both dates"
                },
            ),
            ({"id": theirs["id"], "name": "Mine now"}, 404, {"message": "event not found"}),
            (
                {"id": event["id"], "reference_id": taken["reference_id"]},
                409,
                {
                    "message": "reference_id already used by another event: '{}'".format(
                        taken["reference_id"]
                    )
                },
            ),
        ]
        for body, status, expected in cases:
            response = await client.put("/v1/events/update", headers=tenant.w, json=body)
            assert (response.status_code, response.json()) == (status, expected), body
        assert (await client.get(f"/v1/events/{theirs['id']}", headers=other.r)).json() == theirs


class TestDeleteEvent:
    async def test_needs_write(self, client, tenant):
        event = await create_event(client, tenant)
        assert (await client.delete(f"/v1/events/{event['id']}")).status_code == 401
        assert (
            await client.delete(f"/v1/events/{event['id']}", headers=tenant.r)
        ).status_code == 403

    async def test_deletes_event_attendees_and_unused_products(self, client, tenant):
        event = await create_event(client, tenant, reference_id="to-go")
        product = await create_product(client, tenant, event_id=event["id"])
        user = await create_user(client, tenant)
        await client.post(
            "/v1/events/attendees/register",
            headers=tenant.w,
            json={"event_id": event["id"], "user_id": user["id"]},
        )
        response = await client.delete("/v1/events/to-go", headers=tenant.w)
        assert response.status_code == 204 and response.content == b""
        assert (await client.get(f"/v1/events/{event['id']}", headers=tenant.r)).status_code == 404
        assert (
            await client.get(f"/v1/products/{product['id']}", headers=tenant.r)
        ).status_code == 404

    async def test_refused_while_items_or_sales_exist(self, client, tenant):
        user = await create_user(client, tenant)
        with_items = await create_event(client, tenant)
        product = await create_product(client, tenant, event_id=with_items["id"])
        await issue_items(client, tenant, product["id"], user["id"])
        with_sales = await create_event(client, tenant)
        sold = await create_product(client, tenant, event_id=with_sales["id"])
        assert (
            await create_order(client, tenant, user["id"], (sold["id"], 1), status="pending")
        ).status_code == 201
        for event in (with_items, with_sales):
            response = await client.delete(f"/v1/events/{event['id']}", headers=tenant.w)
            assert response.status_code == 409
            assert response.json() == {
                "message": "event is still referenced by products with issued items or sales"
            }
            assert (
                await client.get(f"/v1/events/{event['id']}", headers=tenant.r)
            ).status_code == 200

    async def test_another_projects_event_is_404(self, client, tenant, other):
        theirs = await create_event(client, other)
        assert (
            await client.delete(f"/v1/events/{theirs['id']}", headers=tenant.w)
        ).status_code == 404
        assert (await client.get(f"/v1/events/{theirs['id']}", headers=other.r)).status_code == 200


class TestAttendees:
    async def test_needs_credentials(self, client, tenant):
        event = await create_event(client, tenant)
        user = await create_user(client, tenant)
        body = {"event_id": event["id"], "user_id": user["id"]}
        assert (await client.post("/v1/events/attendees/register", json=body)).status_code == 401
        assert (
            await client.post("/v1/events/attendees/register", headers=tenant.r, json=body)
        ).status_code == 403
        assert (await client.get(f"/v1/events/{event['id']}/attendees")).status_code == 401

    async def test_register_then_update_timestamps(self, client, tenant):
        event = await create_event(client, tenant)
        user = await create_user(client, tenant)
        before = int(time.time())
        response = await client.post(
            "/v1/events/attendees/register",
            headers=tenant.w,
            json={"event_id": event["id"], "email": user["email"].upper()},
        )
        assert response.status_code == 200
        attendee = response.json()
        assert set(attendee) == {
            "id",
            "created_at",
            "updated_at",
            "event_id",
            "user",
            "event",
            "registered_at",
            "checked_in_at",
        }
        assert attendee["event"] == event and attendee["event_id"] == event["id"]
        assert attendee["user"] == {k: v for k, v in user.items() if k != "wallets"}
        assert before <= attendee["registered_at"] <= int(time.time()) + 1
        assert attendee["checked_in_at"] is None

        again = await client.post(
            "/v1/events/attendees/register",
            headers=tenant.w,
            json={
                "event_id": event["id"],
                "reference_id": user["referenceId"],
                "checked_in_at": 1_800_000_000,
            },
        )
        assert again.json()["id"] == attendee["id"]
        assert again.json()["registered_at"] == attendee["registered_at"]
        assert again.json()["checked_in_at"] == 1_800_000_000

        listed = await client.get(f"/v1/events/{event['id']}/attendees", headers=tenant.r)
        assert listed.status_code == 200
        expected = {k: v for k, v in again.json().items() if k != "event"}
        assert listed.json() == {"event": event, "attendees": [expected]}

    async def test_first_check_in_adds_one_reputation(self, client, tenant):
        event = await create_event(client, tenant)
        user = await create_user(client, tenant)
        body = {"event_id": event["id"], "user_id": user["id"]}
        await client.post("/v1/events/attendees/register", headers=tenant.w, json=body)
        for at in (1_800_000_000, 1_800_000_100):
            await client.post(
                "/v1/events/attendees/register", headers=tenant.w, json=body | {"checked_in_at": at}
            )
        reputation = await client.post(
            "/v1/users/reputation",
            headers=tenant.w,
            json={"id": user["id"], "delta": 1, "reason": "probe"},
        )
        assert reputation.json()["balance"] == 2  # 1 from the first check-in, 1 from the probe

    async def test_rules(self, client, tenant, other):
        event = await create_event(client, tenant)
        user = await create_user(client, tenant)
        their_event = await create_event(client, other)
        their_user = await create_user(client, other)
        cases = [
            (
                {"event_id": event["id"]},
                400,
                {"errors": ["one of email, reference_id or user_id is required"]},
            ),
            ({"user_id": user["id"]}, 400, {"errors": ["event_id: field required"]}),
            ({"event_id": "nope", "user_id": user["id"]}, 400, None),
            (
                {"event_id": event["id"], "user_id": user["id"], "registered_at": 0},
                400,
                {"errors": ["registered_at: Input should be greater than 0"]},
            ),
            (
                {"event_id": event["id"], "user_id": user["id"], "checked_in_at": "soon"},
                400,
                {"errors": ["checked_in_at: Input should be a valid integer"]},
            ),
            (
                {"event_id": their_event["id"], "user_id": user["id"]},
                404,
                {"message": "event not found"},
            ),
            (
                {"event_id": event["id"], "user_id": their_user["id"]},
                404,
                {"message": "user not found"},
            ),
        ]
        for body, status, expected in cases:
            response = await client.post(
                "/v1/events/attendees/register", headers=tenant.w, json=body
            )
            assert response.status_code == status, body
            if expected is not None:
                assert response.json() == expected, body
        listed = await client.get(f"/v1/events/{event['id']}/attendees", headers=tenant.r)
        assert listed.json()["attendees"] == []

    async def test_attendees_of_another_projects_event_is_404(self, client, tenant, other):
        theirs = await create_event(client, other)
        response = await client.get(f"/v1/events/{theirs['id']}/attendees", headers=tenant.r)
        assert response.status_code == 404
        response = await client.get("/v1/events/not-a-uuid/attendees", headers=tenant.r)
        assert response.status_code == 400 and response.json()["errors"][0].startswith("event_id:")
