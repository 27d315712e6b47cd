"""The events pages: the list, creating and editing an event, its attendees (the door view is
tests/console/test_door.py); each project's owner sees their own only, and a forged form
changes nothing."""

from datetime import UTC, datetime
from urllib.parse import unquote

import pytest

from tests.factories import (
    create_event,
    create_user,
    row_counts,
)

START = int(datetime(2030, 6, 1, 18, 30, tzinfo=UTC).timestamp())
END = int(datetime(2030, 6, 1, 23, 0, tzinfo=UTC).timestamp())


def events_of(tenant) -> str:
    return f"/console/projects/{tenant.project_id}/events"


def event_form(**overrides: str) -> dict[str, str]:
    return {
        "name": "Harbour Night",
        "start": "2030-06-01T18:30",
        "end": "2030-06-01T23:00",
        "location": "Pier 4",
        "address": "4 Quay Road",
        "description": "Lanterns on the water",
        "reference_id": "harbour-night",
    } | overrides


def local(seconds: int) -> str:
    """What a datetime-local field shows for these Unix seconds, in UTC."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M" if moment.second == 0 else "%Y-%m-%dT%H:%M:%S")


def shown(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def form_of(event: dict) -> dict[str, str]:
    """The edit form as the event page fills it."""
    return {
        "name": event["name"],
        "start": local(event["start_date"]),
        "end": local(event["end_date"]),
        "location": event["location"],
        "address": event["address"],
        "description": event["description"] or "",
        "reference_id": event["reference_id"] or "",
    }


async def api_event(client, tenant, event_id: str) -> dict:
    response = await client.get(f"/v1/events/{event_id}", headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()


async def attendees(client, tenant, event_id: str) -> list[dict]:
    response = await client.get(f"/v1/events/{event_id}/attendees", headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()["attendees"]


async def register(client, tenant, event_id: str, user_id: str, **times: int) -> dict:
    response = await client.post(
        "/v1/events/attendees/register",
        headers=tenant.w,
        json={"event_id": event_id, "user_id": user_id, **times},
    )
    assert response.status_code == 200, response.text
    return response.json()


class TestEventList:
    async def test_lists_the_projects_events_with_their_attendance(
        self, operator, tenant, other, client
    ):
        event = await create_event(client, tenant, name="Spring Fair")
        await create_event(client, other, name="Their Gala")
        first, second = await create_user(client, tenant), await create_user(client, tenant)
        await register(client, tenant, event["id"], first["id"], checked_in_at=1_800_000_000)
        await register(client, tenant, event["id"], second["id"])
        listed = await operator.get(events_of(tenant))
        assert listed.status_code == 200
        assert "Spring Fair" in listed.text and "Their Gala" not in listed.text
        row = next(r for r in listed.text.split("<tr>") if "Spring Fair" in r)
        assert f'href="{events_of(tenant)}/{event["id"]}"' in row
        assert shown(event["start_date"]) in row and "Main Hall" in row
        assert "<td>2</td><td>1</td>" in row  # registered, checked in
        assert "in UTC" in listed.text and 'type="datetime-local"' in listed.text

    async def test_pages_hold_fifty_events(self, operator, tenant, client):
        for n in range(51):
            await create_event(client, tenant, name=f"Night {n:02d}")
        first = await operator.get(events_of(tenant))
        assert "Night 00" in first.text and "Night 49" in first.text
        assert "Night 50" not in first.text and "Page 1 of 2" in first.text
        assert '?page=2" rel="next"' in first.text
        second = await operator.get(f"{events_of(tenant)}?page=2")
        assert "Night 50" in second.text and "Night 49" not in second.text
        assert "Page 2 of 2" in second.text


@pytest.fixture(params=["operator", "owner"])
def console(request):
    """Each who may manage the project: an operator, and the project's owner."""
    return request.getfixturevalue(request.param)


class TestCreateEvent:
    async def test_creates_the_event_the_api_then_reads(self, console, tenant, client):
        created = await console.post(events_of(tenant), event_form())
        assert created.status_code == 303
        location = created.headers["location"]
        assert unquote(location).endswith("?notice=Event created.")
        event_id = location.split("?")[0].rsplit("/", 1)[1]
        fetched = await api_event(client, tenant, event_id)
        assert fetched == {
            "id": event_id,
            "created_at": fetched["created_at"],
            "updated_at": fetched["updated_at"],
            "name": "Harbour Night",
            "start_date": START,
            "end_date": END,
            "location": "Pier 4",
            "address": "4 Quay Road",
            "project_id": str(tenant.project_id),
            "reference_id": "harbour-night",
            "description": "Lanterns on the water",
        }
        page = await console.get(location)
        assert page.status_code == 200 and "Event created." in page.text

    async def test_empty_optional_fields_are_none(self, operator, tenant, client):
        created = await operator.post(
            events_of(tenant), event_form(description="", reference_id="", start="2030-06-01 18:30")
        )
        event_id = created.headers["location"].split("?")[0].rsplit("/", 1)[1]
        event = await api_event(client, tenant, event_id)
        assert event["description"] is None and event["reference_id"] is None
        assert event["start_date"] == START

    async def test_invalid_input_is_a_400_page_naming_each_field(self, operator, tenant, database):
        before = await row_counts(database)
        refused = await operator.post(
            events_of(tenant), event_form(name="ab", start="soon", end="", location="")
        )
        assert refused.status_code == 400
        assert "The event was not created" in refused.text
        for line in (
            "Name: String should have at least 3 characters",
            "Start: not a date and time (as 2030-06-01T18:30, UTC)",
            "End: required",
            "Location: String should have at least 1 character",
        ):
            assert f"<li>{line}</li>" in refused.text
        assert await row_counts(database) == before

    async def test_an_end_before_the_start_is_refused(self, operator, tenant, database):
        before = await row_counts(database)
        refused = await operator.post(events_of(tenant), event_form(end="2030-06-01T18:29"))
        assert refused.status_code == 400
        assert "<li>End: must not be before start</li>" in refused.text
        assert await row_counts(database) == before

    async def test_a_taken_reference_id_is_a_409_page(self, operator, tenant, client, database):
        await create_event(client, tenant, reference_id="harbour-night")
        before = await row_counts(database)
        refused = await operator.post(events_of(tenant), event_form())
        assert refused.status_code == 409
        assert "reference_id already used by another event: &#39;harbour-night&#39;" in refused.text
        assert await row_counts(database) == before


class TestEventPage:
    async def test_shows_the_event_a_filled_edit_form_and_the_attendees(
        self, operator, tenant, client
    ):
        event = await create_event(client, tenant)
        user = await create_user(client, tenant)
        await register(
            client,
            tenant,
            event["id"],
            user["id"],
            registered_at=1_700_000_000,
            checked_in_at=1_800_000_000,
        )
        waiting = await create_user(client, tenant, firstName=None, lastName=None)
        await register(client, tenant, event["id"], waiting["id"])
        page = await operator.get(f"{events_of(tenant)}/{event['id']}")
        assert page.status_code == 200
        assert f"<h1>{event['name']}</h1>" in page.text
        for name, value in form_of(event).items():
            if name != "description":
                assert f'name="{name}"' in page.text and f'value="{value}"' in page.text
        assert f">\n{event['description']}</textarea>" in page.text
        row = next(r for r in page.text.split("<tr>") if user["email"] in r)
        assert f"<td>{user['firstName']} {user['lastName']}</td>" in row
        assert shown(1_700_000_000) in row and shown(1_800_000_000) in row
        row = next(r for r in page.text.split("<tr>") if waiting["email"] in r)
        assert "<td></td>" in row and "not yet" in row
        assert f"{events_of(tenant)}/{event['id']}/door" in page.text

    async def test_an_edit_changes_the_fields_changed_only(self, operator, tenant, client):
        # Dates with seconds, and line breaks: what the form does not change stays as it is.
        event = await create_event(client, tenant, description="Line one\nLine two")
        form = form_of(event) | {"name": "Renamed Night", "location": "Pier 5", "reference_id": ""}
        saved = await operator.post(f"{events_of(tenant)}/{event['id']}", form)
        assert saved.status_code == 303
        assert unquote(saved.headers["location"]).endswith("?notice=Event saved.")
        after = await api_event(client, tenant, event["id"])
        assert after == event | {
            "name": "Renamed Night",
            "location": "Pier 5",
            "reference_id": None,
            "updated_at": after["updated_at"],
        }
        assert after["updated_at"] != event["updated_at"]
        as_sent = form_of(after) | {"description": "Line one\r\nLine two"}  # as browsers do
        again = await operator.post(f"{events_of(tenant)}/{event['id']}", as_sent)
        assert unquote(again.headers["location"]).endswith("?notice=Nothing changed.")
        assert await api_event(client, tenant, event["id"]) == after

    async def test_new_dates_are_saved(self, operator, tenant, client):
        event = await create_event(client, tenant)
        form = form_of(event) | {"start": "2030-06-01T18:30", "end": "2030-06-01T23:00"}
        assert (await operator.post(f"{events_of(tenant)}/{event['id']}", form)).status_code == 303
        after = await api_event(client, tenant, event["id"])
        assert (after["start_date"], after["end_date"]) == (START, END)

    async def test_dates_out_of_order_are_refused_and_change_nothing(
        self, operator, tenant, client
    ):
        event = await create_event(client, tenant)
        path = f"{events_of(tenant)}/{event['id']}"
        before_start = local(event["start_date"] - 3600)
        one = await operator.post(path, form_of(event) | {"end": before_start})
        assert one.status_code == 409 and "before it starts" in one.text
        both = await operator.post(
            path, form_of(event) | {"start": "2030-06-01T18:30", "end": "2030-06-01T18:00"}
        )
        assert both.status_code == 400 and "<li>End: must not be before start</li>" in both.text
        assert await api_event(client, tenant, event["id"]) == event

    async def test_invalid_input_is_a_400_page_and_changes_nothing(self, operator, tenant, client):
        event = await create_event(client, tenant)
        refused = await operator.post(
            f"{events_of(tenant)}/{event['id']}",
            form_of(event) | {"name": "Fine Name", "address": "", "start": "31/12/2030"},
        )
        assert refused.status_code == 400
        assert "<li>Address: String should have at least 1 character</li>" in refused.text
        assert "<li>Start: not a date and time" in refused.text
        assert await api_event(client, tenant, event["id"]) == event

    async def test_a_taken_reference_id_is_409(self, operator, tenant, client):
        event = await create_event(client, tenant)
        taken = await create_event(client, tenant)
        refused = await operator.post(
            f"{events_of(tenant)}/{event['id']}",
            form_of(event) | {"reference_id": taken["reference_id"]},
        )
        assert refused.status_code == 409 and "already used" in refused.text
        assert await api_event(client, tenant, event["id"]) == event


class TestScope:
    async def test_another_projects_owner_finds_nothing(
        self, owner, tenant, other, client, database
    ):
        event = await create_event(client, other)
        user = await create_user(client, other)
        theirs = events_of(other)
        mine = await create_event(client, tenant)
        await owner.get(events_of(tenant))  # the session's CSRF token
        before = await row_counts(database)
        for path in (theirs, f"{theirs}/{event['id']}", f"{theirs}/{event['id']}/door"):
            assert (await owner.get(path)).status_code == 404, path
        for path, form in (
            (theirs, event_form()),
            (f"{theirs}/{event['id']}", form_of(event) | {"name": "Taken Over"}),
            (f"{theirs}/{event['id']}/door", {"who": user["email"]}),
        ):
            assert (await owner.post(path, form)).status_code == 404, path
        # Their event's id under my project's path is not found either.
        in_mine = f"{events_of(tenant)}/{event['id']}"
        assert (await owner.get(in_mine)).status_code == 404
        assert (await owner.get(f"{in_mine}/door")).status_code == 404
        assert (await owner.post(in_mine, form_of(event))).status_code == 404
        assert (await owner.post(f"{in_mine}/door", {"who": user["email"]})).status_code == 404
        assert await row_counts(database) == before
        assert await api_event(client, other, event["id"]) == event
        assert (await owner.get(f"{events_of(tenant)}/{mine['id']}")).status_code == 200

    async def test_without_a_session_the_pages_go_to_the_sign_in_page(self, client, tenant):
        response = await client.get(events_of(tenant))
        assert response.status_code == 303
        assert response.headers["location"].startswith("/console/login?next=")


class TestCsrf:
    async def test_a_forged_or_missing_token_is_403_and_changes_nothing(
        self, operator, tenant, client, database
    ):
        event = await create_event(client, tenant)
        user = await create_user(client, tenant)
        before = await row_counts(database)
        path = f"{events_of(tenant)}/{event['id']}"
        for target, form in (
            (events_of(tenant), event_form()),
            (path, form_of(event) | {"name": "Forged Name"}),
            (f"{path}/door", {"who": user["email"]}),
        ):
            forged = await operator.http.post(target, data=form | {"csrf": "not-the-token"})
            missing = await operator.http.post(target, data=form)
            assert forged.status_code == missing.status_code == 403, target
        assert await row_counts(database) == before
        assert await api_event(client, tenant, event["id"]) == event
        assert await attendees(client, tenant, event["id"]) == []
