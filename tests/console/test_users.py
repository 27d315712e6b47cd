"""The users pages: search by the API's lookup rules, the first page, and a user's profile
(wallets, holdings, reputation) as the API answers it."""

import uuid
from html.parser import HTMLParser

from tests.factories import create_product, create_user, create_users, issue_items


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def table_rows(html: str) -> list[list[str]]:
    """Every table row of a page as the texts of its cells (header rows too)."""
    parser = _Tables()
    parser.feed(html)
    return parser.rows


def users_path(tenant) -> str:
    return f"/console/projects/{tenant.project_id}/users"


async def _adjust(client, tenant, user, delta, reason):
    response = await client.post(
        "/v1/users/reputation",
        headers=tenant.w,
        json={"id": user["id"], "delta": delta, "reason": reason},
    )
    assert response.status_code == 201, response.text
    return response.json()


class TestUserSearch:
    async def test_finds_a_user_by_email_or_reference_id(self, operator, client, tenant):
        ada = await create_user(
            client, tenant, email="ada@example.com", firstName="Ada", lastName="Lovelace"
        )
        await create_users(client, tenant, 2)
        await _adjust(client, tenant, ada, 7, "early bird")
        for q in ("ADA@example.com", ada["referenceId"], ada["id"]):
            found = await operator.get(f"{users_path(tenant)}?q={q}")
            assert found.status_code == 200
            rows = table_rows(found.text)
            assert rows == [
                ["Email", "Name", "Reference id", "Activated", "Reputation"],
                ["ada@example.com", "Ada Lovelace", ada["referenceId"], "no", "7"],
            ], q
            assert f"/users/{ada['id']}" in found.text

    async def test_an_unknown_identifier_finds_nobody(self, operator, client, tenant):
        await create_user(client, tenant)
        for q in ("nobody@example.com", "no-such-ref", str(uuid.uuid4())):
            found = await operator.get(f"{users_path(tenant)}?q={q}")
            assert found.status_code == 200
            assert table_rows(found.text) == [] and "No user is" in found.text

    async def test_another_projects_user_is_not_found(self, operator, client, tenant, other):
        theirs = await create_user(client, other)
        found = await operator.get(f"{users_path(tenant)}?q={theirs['email']}")
        assert table_rows(found.text) == []

    async def test_without_a_query_the_first_page_of_fifty(self, operator, client, tenant):
        created = await create_users(client, tenant, 51)
        first = await operator.get(users_path(tenant))
        assert first.status_code == 200 and "51 users, page 1 of 2" in first.text
        assert [row[0] for row in table_rows(first.text)[1:]] == [u["email"] for u in created[:50]]
        second = await operator.get(f"{users_path(tenant)}?page=2")
        assert [row[0] for row in table_rows(second.text)[1:]] == [created[50]["email"]]


class TestUserProfile:
    async def test_shows_wallets_holdings_and_reputation_as_the_api(self, owner, client, tenant):
        ada = await create_user(client, tenant)
        product = await create_product(client, tenant, name="Gold pass")
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        await _adjust(client, tenant, ada, 10, "joined")
        await _adjust(client, tenant, ada, -3, "late")
        shown = await owner.get(f"{users_path(tenant)}/{ada['id']}")
        assert shown.status_code == 200
        profile = (
            await client.post("/v1/users/profile", headers=tenant.r, json={"id": ada["id"]})
        ).json()
        holdings = (
            await client.post("/v1/users/items", headers=tenant.r, json={"id": ada["id"]})
        ).json()
        history = (
            await client.post(
                "/v1/users/reputation/history", headers=tenant.r, json={"id": ada["id"]}
            )
        ).json()
        rows = table_rows(shown.text)
        wallets = [[w["address"], w["type"], w["custody"]] for w in profile["wallets"]]
        assert wallets and all(wallet in rows for wallet in wallets)
        [held] = holdings["items"]
        assert held["id"] == item["id"]
        item_row = next(row for row in rows if row[0].startswith("Gold pass"))
        assert item_row[1] == f"#{held['item_id']} {held['id']}"
        entries = [[e["delta"], e["balance"], e["reason"]] for e in history["entries"]]
        assert entries == [[10, 10, "joined"], [-3, 7, "late"]]
        assert [row[1:] for row in rows if row[-1] in ("joined", "late")] == [
            ["+10", "10", "joined"],
            ["-3", "7", "late"],
        ]
        assert f"<dt>Reputation</dt><dd>{history['balance']}</dd>" in shown.text

    async def test_an_unknown_user_is_404(self, operator, tenant, client, other):
        theirs = await create_user(client, other)
        for user_id in (theirs["id"], str(uuid.uuid4())):
            missing = await operator.get(f"{users_path(tenant)}/{user_id}")
            assert missing.status_code == 404 and "user not found" in missing.text


class TestScope:
    async def test_another_projects_owner_gets_404_on_every_page(self, owner, client, other):
        theirs = await create_user(client, other)
        for path in (users_path(other), f"{users_path(other)}/{theirs['id']}"):
            refused = await owner.get(path)
            assert refused.status_code == 404, path
            assert theirs["email"] not in refused.text
