"""The console's waiting list page: every entry in line order with its place, status and
offer, and an operator taking one off the list through the API's use-case."""

import html
import re

from tessera.console.service import create_operator
from tessera.db import database_of
from tests.console.conftest import OPERATOR_EMAIL, OPERATOR_PASSWORD, sign_in
from tests.waiting.test_waiting_list import joined, line, offers, sold_out

ROW = re.compile(r'<tr class="(\w+)">\s*<th scope="row">(\d*)</th>\s*<td>([^<]+)</td>')


def rows(page: str) -> list[tuple[str, str, str]]:
    """The table's rows as (status, place, email)."""
    return [(status, place, html.unescape(email)) for status, place, email in ROW.findall(page)]


async def test_the_list_shows_the_line_and_its_offers_and_removes_an_entry(
    client, tenant, mail_app
):
    product = await sold_out(client, tenant, stock=1)
    for email in ("ada@example.com", "bob@example.com", "cy@example.com"):
        await joined(client, tenant, product, email)
    await client.patch(f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 2})
    await create_operator(database_of(mail_app), email=OPERATOR_EMAIL, password=OPERATOR_PASSWORD)
    console = await sign_in(mail_app, OPERATOR_EMAIL, OPERATOR_PASSWORD)
    path = f"/console/projects/{tenant.project_id}/products/{product['id']}/waiting-list"
    try:
        detail = await console.get(
            f"/console/projects/{tenant.project_id}/products/{product['id']}"
        )
        assert f'href="{path}"' in detail.text
        shown = await console.get(path)
        assert shown.status_code == 200
        assert rows(shown.text) == [
            ("offered", "1", "ada@example.com"),
            ("waiting", "2", "bob@example.com"),
            ("waiting", "3", "cy@example.com"),
        ]
        assert '<dd id="count-waiting">2</dd>' in shown.text
        assert '<dd id="count-offered">1</dd>' in shown.text
        assert "open until" in shown.text and "Withdraw the offer" in shown.text
        entries = (
            await client.get(f"/v1/products/{product['id']}/waiting-list", headers=tenant.r)
        ).json()["entries"]
        ada = entries[0]["id"]
        removed = await console.post(f"{path}/{ada}/remove")
        assert removed.status_code == 303, removed.text
        after = await console.get(removed.headers["location"])
        assert "ada@example.com is off the waiting list." in after.text
        # Her offer went to the next in line.
        assert rows(after.text) == [
            ("removed", "", "ada@example.com"),
            ("offered", "1", "bob@example.com"),
            ("waiting", "2", "cy@example.com"),
        ]
        assert await line(client, tenant, product) == [
            ("ada@example.com", "removed", None),
            ("bob@example.com", "offered", 1),
            ("cy@example.com", "waiting", 2),
        ]
        assert set(await offers(mail_app)) == {"ada@example.com", "bob@example.com"}
        # Another project's product is not found.
        other = await console.get(
            f"/console/projects/{tenant.project_id}/products/{tenant.project_id}/waiting-list"
        )
        assert other.status_code == 404
    finally:
        await console.http.aclose()
