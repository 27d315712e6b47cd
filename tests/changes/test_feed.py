"""GET /v1/changes: the project's changes in commit order, a page at a time, each exactly once,
behind an opaque cursor; with concurrent writers, and (PostgreSQL) a transaction left open."""

import asyncio
import time

import pytest
from sqlalchemy import literal_column, select

from tessera.changes.schemas import CURSOR_PATTERN
from tessera.models.base import utcnow
from tessera.users.schemas import UserCreate
from tessera.users.service import insert_users, new_user
from tests.changes.feed import WAIT_SECONDS, page, read_all, shown, typed
from tests.conftest import BACKEND
from tests.factories import (
    create_order,
    create_product,
    create_user,
    create_users,
    issue_items,
    row_counts,
)

PATTERN_REFUSED = f"String should match pattern '{CURSOR_PATTERN}'"


async def nine_changes(client, tenant) -> list[tuple[str, str]]:
    """Nine changes in four transactions: (type, id of the object) of each, in commit order."""
    users = await create_users(client, tenant, 3)
    product = await create_product(client, tenant)
    items = await issue_items(client, tenant, product["id"], users[0]["id"], users[1]["id"])
    response = await create_order(client, tenant, users[2]["id"], (product["id"], 1))
    assert response.status_code == 201
    order = response.json()
    [bought] = order["product_items"]
    return [
        *(("user.created", user["id"]) for user in users),
        ("product.created", product["id"]),
        *(("item.issued", item["id"]) for item in items),
        ("item.issued", bought["id"]),
        ("order.created", order["id"]),
        ("order.completed", order["id"]),
    ]


def ids(events: list[dict]) -> list[tuple[str, str]]:
    return [(event["type"], event["data"]["id"]) for event in events]


class TestCredentials:
    async def test_needs_a_credential(self, client, tenant):
        await create_user(client, tenant)
        response = await client.get("/v1/changes")
        assert response.status_code == 401 and set(response.json()) == {"message"}
        response = await client.get("/v1/changes", headers={"x-api-key": tenant.read_key + "x"})
        assert response.status_code == 401
        assert response.json() == {"message": "invalid, expired or revoked credential"}

    async def test_a_read_key_is_enough_and_a_write_key_reads_the_same(self, client, tenant):
        user = await create_user(client, tenant)
        [event] = await shown(client, tenant, 1)
        for headers in (tenant.r, tenant.w):
            response = await client.get("/v1/changes", headers=headers)
            assert response.status_code == 200
            assert response.json()["events"] == [event]
        assert typed([event]) == [("user.created", user)]


class TestPaging:
    async def test_every_page_size_gives_every_change_once_in_commit_order(self, client, tenant):
        expected = await nine_changes(client, tenant)
        everything = await shown(client, tenant, len(expected))
        assert ids(everything) == expected
        assert len({event["id"] for event in everything}) == len(expected)
        for limit in range(1, len(expected) + 2):
            pages, after = [], None
            while True:
                body = await page(client, tenant, after=after, limit=limit)
                pages.append(body["events"])
                if not body["events"]:
                    assert body["cursor"] == after  # an empty page keeps the cursor
                    break
                after = body["cursor"]
            # Full pages, then the rest, then an empty one.
            sizes = [len(events) for events in pages]
            full, rest = divmod(len(expected), limit)
            assert sizes == [limit] * full + ([rest] if rest else []) + [0], limit
            assert [event for events in pages for event in events] == everything, limit

    async def test_the_default_page_is_100_and_1000_is_the_most(self, client, tenant):
        users = []
        for start in range(0, 1001, 500):  # email only, under the body limit
            bodies = [{"email": f"u{n}@example.com"} for n in range(start, min(start + 500, 1001))]
            response = await client.post("/v1/users/create", headers=tenant.w, json=bodies)
            assert response.status_code == 201, response.text
            users += response.json()["users"]
        everything = await shown(client, tenant, 1001)
        assert typed(everything) == [("user.created", user) for user in users]
        default = await page(client, tenant)
        assert default["events"] == everything[:100]
        most = await page(client, tenant, limit=1000)
        assert most["events"] == everything[:1000]
        rest = await page(client, tenant, after=most["cursor"], limit=1000)
        assert rest["events"] == everything[1000:]

    @pytest.mark.parametrize(
        ("params", "error"),
        [
            ({"limit": 0}, "limit: Input should be greater than or equal to 1"),
            ({"limit": 1001}, "limit: Input should be less than or equal to 1000"),
            (
                {"limit": "ten"},
                "limit: Input should be a valid integer, unable to parse string as an integer",
            ),
            ({"limt": 10}, "limt: unknown query parameter"),
            ({"before": "x"}, "before: unknown query parameter"),
        ],
    )
    async def test_bounds_and_unknown_parameters_are_400(
        self, client, tenant, database, params, error
    ):
        await create_user(client, tenant)
        counts = await row_counts(database)
        response = await client.get("/v1/changes", headers=tenant.r, params=params)
        assert response.status_code == 400
        assert response.json() == {"errors": [error]}
        assert await row_counts(database) == counts


class TestCursor:
    async def test_no_after_is_the_start_even_of_an_empty_feed(self, client, tenant):
        empty = await page(client, tenant)
        assert empty["events"] == [] and empty["cursor"]
        expected = await nine_changes(client, tenant)
        after_empty = await shown(client, tenant, len(expected), after=empty["cursor"])
        assert ids(after_empty) == expected
        assert after_empty == (await read_all(client, tenant))[0]

    async def test_the_cursor_resumes_after_the_last_change_read(self, client, tenant):
        first = await create_users(client, tenant, 2)
        assert typed(await shown(client, tenant, 2)) == [("user.created", u) for u in first]
        read, cursor = await read_all(client, tenant)
        assert (await page(client, tenant, after=cursor)) == {"events": [], "cursor": cursor}
        later = await create_users(client, tenant, 2)
        resumed = await shown(client, tenant, 2, after=cursor)
        assert typed(resumed) == [("user.created", u) for u in later]
        assert read + resumed == (await read_all(client, tenant))[0]
        # The same cursor, asked again, answers the same.
        assert (await read_all(client, tenant, after=cursor))[0] == resumed

    @pytest.mark.parametrize(
        "after",
        [
            "not a cursor",
            "",
            "12",
            "1.2.3",
            "1.x",
            "-1.5",
            "0.-5",
            f"{10**18}.0",  # 19 digits
            f"0.{10**18}",
            "1.2 ",
            "MS4y",  # base64 of "1.2": how cursors once looked
            "1.2\n",
        ],
    )
    async def test_anything_but_a_cursor_is_400_and_changes_nothing(
        self, client, tenant, database, after
    ):
        await create_user(client, tenant)
        counts = await row_counts(database)
        response = await client.get("/v1/changes", headers=tenant.r, params={"after": after})
        assert response.status_code == 400
        assert response.json() == {"errors": [f"after: {PATTERN_REFUSED}"]}
        assert await row_counts(database) == counts

    async def test_any_text_of_the_pattern_is_a_cursor(self, client, tenant):
        """The OpenAPI's pattern says it all: 18 digits, a dot, 18 digits reads from there."""
        users = await create_users(client, tenant, 2)
        assert typed(await shown(client, tenant, 2)) == [("user.created", u) for u in users]
        _, cursor = await read_all(client, tenant)
        txid, seq = cursor.split(".")
        assert cursor == f"{int(txid)}.{int(seq)}"
        for after in ("0.0", "000000000000000000.000000000000000000"):
            assert len((await page(client, tenant, after=after))["events"]) == 2
        end = "9" * 18 + "." + "9" * 18
        assert await page(client, tenant, after=end) == {"events": [], "cursor": end}


class TestProjects:
    async def test_a_project_sees_only_its_own_changes(self, client, tenant, other):
        mine = await create_users(client, tenant, 2)
        theirs = await create_users(client, other, 3)
        also_mine = await create_product(client, tenant)
        assert typed(await shown(client, tenant, 3)) == [
            *(("user.created", user) for user in mine),
            ("product.created", also_mine),
        ]
        assert typed(await shown(client, other, 3)) == [("user.created", u) for u in theirs]

    async def test_another_projects_cursor_reveals_nothing_of_it(self, client, tenant, other):
        before = await create_user(client, other)
        await create_users(client, tenant, 3)
        await shown(client, tenant, 3)
        _, cursor = await read_all(client, tenant)
        # Only a place: the other project's changes after it, none of the tenant's.
        assert await page(client, other, after=cursor) == {"events": [], "cursor": cursor}
        later = await create_user(client, other)
        assert typed(await shown(client, other, 1, after=cursor)) == [("user.created", later)]
        assert typed(await shown(client, other, 2)) == [
            ("user.created", before),
            ("user.created", later),
        ]


async def follow(client, tenant, count: int, limit: int) -> tuple[list[dict], dict[str, int]]:
    """Page through the feed as writers write, until ``count`` changes are read: the changes
    and, for each cursor given, how many changes were read before it."""
    read: list[dict] = []
    cursors: dict[str, int] = {}
    after = None
    deadline = time.monotonic() + WAIT_SECONDS
    while len(read) < count and time.monotonic() < deadline:
        body = await page(client, tenant, after=after, limit=limit)
        read += body["events"]
        after = body["cursor"]
        cursors.setdefault(after, len(read))
        assert cursors[after] == len(read)  # a cursor stays where it was
        await asyncio.sleep(0 if body["events"] else 0.002)
    return read, cursors


class TestConcurrentWriters:
    async def test_a_reader_paging_meanwhile_reads_every_change_once(self, client, tenant, other):
        requests, per_request = 24, 2
        (read, cursors), *written = await asyncio.gather(
            follow(client, tenant, requests * per_request, limit=3),
            *(create_users(client, tenant, per_request) for _ in range(requests)),
            *(create_users(client, other, per_request) for _ in range(requests // 2)),
        )
        mine, theirs = written[:requests], written[requests:]
        users = {user["id"]: user for batch in mine for user in batch}
        assert len(read) == len(users) == requests * per_request
        assert len({event["id"] for event in read}) == len(read)
        assert sorted(typed(read), key=lambda t: t[1]["id"]) == sorted(
            (("user.created", user) for user in users.values()), key=lambda t: t[1]["id"]
        )
        # A request's users are one transaction's changes: together, in the batch's order.
        place = {event["data"]["id"]: index for index, event in enumerate(read)}
        for batch in mine:
            first = place[batch[0]["id"]]
            assert [place[user["id"]] for user in batch] == list(range(first, first + len(batch)))
        # The same order read again, whatever the page size; each cursor resumes where it was.
        everything, last = await read_all(client, tenant)
        assert everything == read
        assert (await read_all(client, tenant, limit=7))[0] == read
        assert len(cursors) > 1
        for cursor, count in cursors.items():
            assert (await read_all(client, tenant, after=cursor))[0] == read[count:]
        assert await page(client, tenant, after=last) == {"events": [], "cursor": last}
        their_users = {user["id"] for batch in theirs for user in batch}
        assert {event["data"]["id"] for event in await shown(client, other, 24)} == their_users


@pytest.mark.skipif(
    BACKEND != "postgresql",
    reason="SQLite runs one write transaction at a time: none can stay open while another "
    "commits, and commit order is the order of seq",
)
class TestOpenTransaction:
    @pytest.mark.parametrize("ending", ["commit", "rollback"])
    async def test_holds_later_changes_back_until_it_ends(
        self, app, client, tenant, database, ending
    ):
        first = await create_user(client, tenant)
        assert typed(await shown(client, tenant, 1)) == [("user.created", first)]
        _, cursor = await read_all(client, tenant)
        person = UserCreate(email="slow@example.com", first_name="Slow")
        slow = new_user(
            person, box=app.state.box, ss58_prefix=app.state.settings.ss58_prefix, at=utcnow()
        )
        async with database.transaction() as tx:
            # The transaction gets its id now, before the API's change is written.
            assert await tx.scalar(
                select(literal_column("pg_current_xact_id()::text").label("xid"))
            )
            later = await create_user(client, tenant)  # committed, with a higher id
            await asyncio.sleep(0.05)
            assert await page(client, tenant, after=cursor) == {"events": [], "cursor": cursor}
            assert typed((await read_all(client, tenant))[0]) == [("user.created", first)]
            # What the open transaction writes comes before the committed change.
            [written] = await insert_users(tx, tenant.project_id, [slow])
            assert await page(client, tenant, after=cursor) == {"events": [], "cursor": cursor}
            if ending == "commit":
                await tx.commit()
        if ending == "commit":
            response = await client.post(
                "/v1/users/profile", headers=tenant.r, json={"id": str(written.id)}
            )
            assert response.status_code == 200
            expected = [("user.created", response.json()), ("user.created", later)]
        else:
            expected = [("user.created", later)]
        resumed = await shown(client, tenant, len(expected), after=cursor)
        assert typed(resumed) == expected
        everything, _ = await read_all(client, tenant)
        assert typed(everything) == [("user.created", first), *expected]
