"""The products pages: the list, creating and editing a product, issuing items by email, the
sales per day and the items, through the same use-cases (and refusals) as the API."""

import html
import re
import uuid
from datetime import UTC, datetime
from html.parser import HTMLParser
from types import SimpleNamespace
from urllib.parse import unquote

import pytest
from scalecodec.utils.ss58 import ss58_decode
from sqlalchemy import update

from tessera.console.products import chart_of
from tessera.models import OrderItem, ProductItem
from tests import orm
from tests.factories import (
    create_event,
    create_order,
    create_product,
    create_user,
    create_users,
    issue_items,
    row_counts,
)
from tests.jobs.memory_chain import DOT, MemoryChain

METADATA = "https://meta.example/ticket.json"


class FormReader(HTMLParser):
    """The fields of a page's form as a browser would send them untouched: inputs' values,
    checked checkboxes as "on", selects' selected (else first) option, textareas' text."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action, self.inside, self.fields = action, False, {}
        self._select: str | None = None
        self._first: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("action") == self.action
        if not self.inside:
            return
        if tag == "input" and a.get("name"):
            if a.get("type") == "checkbox":
                if "checked" in a:
                    self.fields[a["name"]] = "on"
            else:
                self.fields[a["name"]] = a.get("value", "")
        elif tag == "select":
            self._select, self._first = a["name"], None
        elif tag == "option" and self._select:
            if self._first is None:
                self._first = a.get("value", "")
            if "selected" in a:
                self.fields[self._select] = a.get("value", "")
        elif tag == "textarea":
            self._textarea = a["name"]
            self.fields[a["name"]] = ""

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.fields[self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select" and self._select:
            self.fields.setdefault(self._select, self._first or "")
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def form_of(html: str, action: str) -> dict[str, str]:
    reader = FormReader(action)
    reader.feed(html)
    assert reader.fields, f"no form posting to {action}"
    return reader.fields


def text_of(cell: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", cell)).strip()


def row_of(html: str, marker: str) -> list[str]:
    """The cells' text of the table row holding ``marker``."""
    [row] = [r for r in html.split("<tr") if marker in r]
    return [text_of(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]


def figures(html: str) -> dict[str, str]:
    block = html.split('<dl class="figures">')[1].split("</dl>")[0]
    return {text_of(k): text_of(v) for k, v in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", block)}


def sales_table(html: str) -> list[tuple[str, int]]:
    block = html.split('<table class="sales">')[1].split("</table>")[0]
    return [
        (day, int(quantity))
        for day, quantity in re.findall(r'<th scope="row">([^<]+)</th><td>(\d+)</td>', block)
    ]


def products_page(tenant) -> str:
    return f"/console/projects/{tenant.project_id}/products"


def product_page(tenant, product_id: str) -> str:
    return f"{products_page(tenant)}/{product_id}"


def notice_of(response) -> str:
    return unquote(response.headers["location"].split("?notice=")[1])


async def api_product(client, tenant, product_id: str) -> dict:
    response = await client.get(f"/v1/products/{product_id}", headers=tenant.r)
    assert response.status_code == 200
    return response.json()


async def api_items(client, tenant, product_id: str) -> list[dict]:
    response = await client.get(
        f"/v1/products/{product_id}/items", headers=tenant.r, params={"limit": 100}
    )
    assert response.status_code == 200
    return response.json()["items"]


async def redeem(client, tenant, product_id: str, item_id: str) -> None:
    response = await client.post(
        f"/v1/products/{product_id}/items/redeem",
        headers=tenant.w,
        json={"product_item_id": item_id},
    )
    assert response.status_code == 200, response.text


async def fund(client, tenant, chain: MemoryChain) -> None:
    [wallet] = (await client.get("/v1/projects/wallets", headers=tenant.r)).json()
    chain.fund(bytes.fromhex(ss58_decode(wallet["address"])), 100 * DOT)


class TestList:
    async def test_shows_stock_issued_and_redeemed_as_the_api_does(self, owner, client, tenant):
        ticket = await create_product(client, tenant, stock=10, price="25.00")
        perk = await create_product(client, tenant, type="perks", active=False)
        users = await create_users(client, tenant, 3)
        issued = await issue_items(client, tenant, ticket["id"], *(u["id"] for u in users))
        await redeem(client, tenant, ticket["id"], issued[0]["id"])
        await redeem(client, tenant, ticket["id"], issued[1]["id"])

        listed = await owner.get(products_page(tenant))
        assert listed.status_code == 200
        assert "style=" not in listed.text and "<script" not in listed.text
        for product, expected in ((ticket, ("10", "3", "2")), (perk, ("unlimited", "0", "0"))):
            api = await api_product(client, tenant, product["id"])
            items = await api_items(client, tenant, product["id"])
            redeemed = [i for i in items if i["redemption_count"] > 0]
            assert row_of(listed.text, product["id"]) == [
                api["name"],
                api["type"],
                api["price"],
                "yes" if api["active"] else "no",
                "unlimited" if api["stock"] is None else str(api["stock"]),
                str(len(items)),
                str(len(redeemed)),
            ]
            assert tuple(row_of(listed.text, product["id"])[4:]) == expected
        assert row_of(listed.text, ticket["id"])[1:4] == ["admission", "25.00", "yes"]
        assert row_of(listed.text, perk["id"])[1:4] == ["perks", "0", "no"]

    async def test_fifty_a_page(self, operator, client, tenant):
        made = [await create_product(client, tenant, name=f"P{n:02}") for n in range(51)]
        first = await operator.get(products_page(tenant))
        assert first.text.count("<tr>") == 51  # the header and 50 products
        assert made[49]["id"] in first.text and made[50]["id"] not in first.text
        assert "51 products" in first.text and "?page=2" in first.text
        second = await operator.get(products_page(tenant) + "?page=2")
        assert made[50]["id"] in second.text and made[0]["id"] not in second.text
        assert "Page 2 of 2" in second.text


class TestCreate:
    async def test_the_api_shows_what_the_form_made(self, owner, client, tenant):
        event = await create_event(client, tenant)
        listed = await owner.get(products_page(tenant))
        assert f'<option value="{event["id"]}">' in listed.text
        form = {
            "type": "presale",
            "name": "Early bird",
            "event_id": event["id"],
            "description": "Cheaper, sooner",
            "price": "12.50",
            "active": "on",
            "is_transferable": "on",
            "stock": "100",
            "redemption_quantity": "2",
            "max_per_account": "4",
            "min_rep_balance": "5",
            "chain": "",
            "metadata_uri": "",
            "max_items": "",
        }
        created = await owner.post(products_page(tenant), form)
        assert created.status_code == 303
        location = created.headers["location"]
        assert location.startswith(products_page(tenant) + "/")
        product_id = location.split("?")[0].rsplit("/", 1)[1]
        product = await api_product(client, tenant, product_id)
        assert {k: product[k] for k in form if k in product} == {
            "type": "presale",
            "name": "Early bird",
            "event_id": event["id"],
            "description": "Cheaper, sooner",
            "price": "12.50",
            "active": True,
            "is_transferable": True,
            "stock": 100,
            "redemption_quantity": 2,
            "max_per_account": 4,
            "min_rep_balance": 5,
            "chain": None,
            "metadata_uri": None,
            "max_items": None,
        }
        assert product["is_claimable"] is False and product["mint_nft"] is False
        shown = await owner.get(location)
        assert shown.status_code == 200 and "Product Early bird created." in shown.text

    async def test_the_defaults_are_the_apis(self, owner, client, tenant):
        created = await owner.post(products_page(tenant), {"type": "admission", "name": "Plain"})
        product_id = created.headers["location"].split("?")[0].rsplit("/", 1)[1]
        product = await api_product(client, tenant, product_id)
        assert (product["price"], product["active"], product["stock"]) == ("0", False, None)
        assert (product["redemption_quantity"], product["min_rep_balance"]) == (1, 0)

    async def test_an_nft_product(self, owner, client, tenant, chain):
        await fund(client, tenant, chain)
        created = await owner.post(
            products_page(tenant),
            {
                "type": "admission",
                "name": "Collectible",
                "active": "on",
                "mint_nft": "on",
                "chain": "WestendAssetHub",
                "metadata_uri": METADATA,
                "max_items": "20",
            },
        )
        assert created.status_code == 303
        product_id = created.headers["location"].split("?")[0].rsplit("/", 1)[1]
        product = await api_product(client, tenant, product_id)
        assert (product["mint_nft"], product["metadata_uri"], product["max_items"]) == (
            True,
            METADATA,
            20,
        )
        assert product["nft"] == {
            "chain": "WestendAssetHub",
            "collection_id": None,
            "status": "queued",
        }
        shown = await owner.get(product_page(tenant, product_id))
        nft = "NFT collection: queued on WestendAssetHub · at most 20 items · metadata <code>"
        assert nft + METADATA in shown.text

    @pytest.mark.parametrize(
        ("form", "status", "lines"),
        [
            ({"type": "admission"}, 400, ["name: field required"]),
            (
                {"type": "raffle", "name": "X", "stock": "0", "price": "cheap"},
                400,
                [
                    "type: Input should be 'admission', 'presale' or 'perks'",
                    "price: a number with at most 12 digits before the point and 2 after it",
                    "stock: Input should be greater than or equal to 1",
                ],
            ),
            (
                {"type": "admission", "name": "X", "mint_nft": "on"},
                400,
                [
                    "metadata_uri: required when mint_nft is true",
                    "chain: required when mint_nft is true",
                ],
            ),
            (
                {"type": "admission", "name": "X", "event_id": str(uuid.uuid4())},
                404,
                ["event not found"],
            ),
            (
                {
                    "type": "admission",
                    "name": "X",
                    "mint_nft": "on",
                    "chain": "AssetHub",
                    "metadata_uri": METADATA,
                },
                409,
                ["chain AssetHub is not configured: set TESSERA_CHAIN_ASSETHUB_RPC_URL"],
            ),
        ],
    )
    async def test_refusals_name_the_problems_and_change_nothing(
        self, owner, database, tenant, form, status, lines
    ):
        before = await row_counts(database)
        refused = await owner.post(products_page(tenant), form)
        assert refused.status_code == status
        for line in lines:
            assert line in html.unescape(refused.text)
        assert await row_counts(database) == before


class TestEdit:
    async def test_only_what_changed_is_sent(self, owner, client, tenant):
        event = await create_event(client, tenant)
        product = await create_product(
            client, tenant, event_id=event["id"], stock=10, max_per_account=2, price="5.00"
        )
        path = product_page(tenant, product["id"])
        form = form_of((await owner.get(path)).text, path)
        assert form["event_id"] == event["id"] and form["stock"] == "10"
        changed = await owner.post(path, form | {"name": "Renamed", "max_per_account": ""})
        assert changed.status_code == 303
        assert notice_of(changed) == "Changed: max_per_account, name."
        after = await api_product(client, tenant, product["id"])
        unchanged = {"updated_at", "name", "max_per_account"}
        assert {k: v for k, v in after.items() if k not in unchanged} == {
            k: v for k, v in product.items() if k not in unchanged
        }
        assert (after["name"], after["max_per_account"]) == ("Renamed", None)

        again = await owner.post(path, form_of((await owner.get(path)).text, path))
        assert notice_of(again) == "Nothing to change."
        assert await api_product(client, tenant, product["id"]) == after  # updated_at stays

    async def test_the_fixed_nft_settings_do_not_stand_in_the_way(
        self, owner, client, tenant, chain
    ):
        await fund(client, tenant, chain)
        product = await create_product(
            client, tenant, mint_nft=True, chain="WestendAssetHub", metadata_uri=METADATA
        )
        path = product_page(tenant, product["id"])
        form = form_of((await owner.get(path)).text, path)
        assert (form["mint_nft"], form["chain"], form["metadata_uri"]) == (
            "on",
            "WestendAssetHub",
            METADATA,
        )
        changed = await owner.post(path, form | {"description": "Now with a note"})
        assert notice_of(changed) == "Changed: description."
        moved = await owner.post(path, form | {"chain": "", "metadata_uri": ""})
        assert moved.status_code == 409
        assert "cannot change once the product's NFT collection exists or is queued" in (
            html.unescape(moved.text)
        )

    async def test_stock_below_the_items_issued_is_refused_as_by_the_api(
        self, owner, client, database, tenant
    ):
        product = await create_product(client, tenant, stock=5)
        users = await create_users(client, tenant, 3)
        await issue_items(client, tenant, product["id"], *(u["id"] for u in users))
        path = product_page(tenant, product["id"])
        form = form_of((await owner.get(path)).text, path)
        before = await row_counts(database)
        refused = await owner.post(path, form | {"stock": "2", "name": "Not this either"})
        assert refused.status_code == 409
        assert "stock cannot be 2, below the items already issued (3)" in refused.text
        api = await client.patch(
            f"/v1/products/{product['id']}", headers=tenant.w, json={"stock": 2}
        )
        assert api.status_code == 409 and api.json()["message"] in refused.text
        assert await row_counts(database) == before
        assert await api_product(client, tenant, product["id"]) == product

    async def test_bad_values_are_a_400_listing_each(self, owner, client, database, tenant):
        product = await create_product(client, tenant)
        path = product_page(tenant, product["id"])
        form = form_of((await owner.get(path)).text, path)
        before = await row_counts(database)
        refused = await owner.post(
            path, form | {"name": "", "redemption_quantity": "0", "stock": "lots"}
        )
        assert refused.status_code == 400
        for line in (
            "name: String should have at least 1 character",
            "redemption_quantity: Input should be greater than or equal to 1",
            "stock: Input should be a valid integer",
        ):
            assert line in refused.text
        assert await row_counts(database) == before
        assert await api_product(client, tenant, product["id"]) == product


class TestIssue:
    async def test_items_go_to_the_users_by_email(self, owner, client, tenant):
        product = await create_product(client, tenant)
        users = await create_users(client, tenant, 3)
        emails = f"{users[0]['email'].upper()}\n{users[1]['email']}, {users[2]['email']}\n\n"
        path = product_page(tenant, product["id"])
        issued = await owner.post(f"{path}/items", {"emails": emails})
        assert issued.status_code == 303 and notice_of(issued) == "3 items issued."
        items = await api_items(client, tenant, product["id"])
        assert [i["user"]["email"] for i in items] == [u["email"] for u in users]
        shown = await owner.get(path)
        assert figures(shown.text)["Issued"] == "3"

    @pytest.mark.parametrize(
        ("emails", "status", "line"),
        [
            (
                "{known}\nnobody@example.com",
                404,
                "users not found in this project: nobody@example.com",
            ),
            (
                "{known}, not-an-address",
                400,
                "email not-an-address: value is not a valid email address",
            ),
            (" \n ", 400, "at least one of users or emails is required"),
            (
                "{known}," + ",".join(f"u{n}@example.com" for n in range(550)),
                400,
                "emails: List should have at most 550 items",
            ),
        ],
    )
    async def test_refusals_issue_nothing(
        self, owner, client, database, tenant, emails, status, line
    ):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        before = await row_counts(database)
        path = product_page(tenant, product["id"])
        refused = await owner.post(
            f"{path}/items", {"emails": emails.replace("{known}", user["email"])}
        )
        assert refused.status_code == status
        assert line in html.unescape(refused.text)
        assert await row_counts(database) == before

    async def test_out_of_stock_is_a_409(self, owner, client, database, tenant):
        product = await create_product(client, tenant, stock=1)
        users = await create_users(client, tenant, 2)
        before = await row_counts(database)
        refused = await owner.post(
            f"{product_page(tenant, product['id'])}/items",
            {"emails": ",".join(u["email"] for u in users)},
        )
        assert refused.status_code == 409
        assert await row_counts(database) == before


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


class TestSales:
    async def test_the_table_shows_the_quantities_per_day(self, owner, client, database, tenant):
        product = await create_product(client, tenant)
        other_product = await create_product(client, tenant)
        buyer, second = await create_users(client, tenant, 2)
        orders = []
        for lines, extra in [
            ([(product["id"], 2), (other_product["id"], 7)], {}),
            ([(product["id"], 3)], {"status": "pending"}),
            ([(product["id"], 4)], {}),
            ([(product["id"], 1)], {"status": "pending"}),  # then cancelled
        ]:
            made = await create_order(client, tenant, buyer["id"], *lines, **extra)
            assert made.status_code == 201, made.text
            orders.append(made.json())
        cancelled = await client.post(f"/v1/orders/{orders[3]['id']}/cancel", headers=tenant.w)
        assert cancelled.status_code == 200
        late = await create_order(client, tenant, second["id"], (product["id"], 5))
        orders.append(late.json())
        # When the lines were ordered, across UTC midnights (as if made then).
        when = [
            "2025-03-01 00:05:00",
            "2025-03-01 23:59:00",
            "2025-03-03 00:00:01",
            "2025-03-03 12:00:00",
            "2025-03-04 08:30:00",
        ]
        async with orm.session(database) as session:
            for order, moment in zip(orders, when, strict=True):
                await session.execute(
                    update(OrderItem)
                    .where(OrderItem.order_id == uuid.UUID(order["id"]))
                    .values(created_at=at(moment))
                )
            await session.commit()

        shown = await owner.get(product_page(tenant, product["id"]))
        assert sales_table(shown.text) == [
            ("2025-03-01", 5),
            ("2025-03-02", 0),
            ("2025-03-03", 4),
            ("2025-03-04", 5),
        ]
        sales = await client.get(
            f"/v1/products/{product['id']}/sales", headers=tenant.r, params={"limit": 100}
        )
        counted = [s for s in sales.json()["sales"] if s["order_status"] != "cancelled"]
        assert sum(s["quantity"] for s in counted) == 14
        summary = (
            "Quantities sold per day from 2025-03-01 to 2025-03-04: 14 in all, the most on "
            "2025-03-01 (5)."
        )
        assert f'role="img" aria-label="{summary}"' in shown.text
        assert f"<title>{summary}</title>" in shown.text
        assert shown.text.count("<rect ") == 4
        assert "style=" not in shown.text and "<script" not in shown.text

    async def test_no_sale_is_a_sentence(self, owner, client, tenant):
        product = await create_product(client, tenant)
        shown = await owner.get(product_page(tenant, product["id"]))
        assert "No sales yet" in shown.text and "<svg" not in shown.text

    def test_the_chart_shows_the_last_31_days_up_to_the_last_sale(self):
        sold = [
            SimpleNamespace(day=day, quantity=quantity)
            for day, quantity in [("2025-03-10", 3), ("2025-02-07", 9), ("2025-02-01", 1)]
        ]
        chart = chart_of(sold)
        assert chart is not None
        assert [(b.day, b.quantity) for b in chart.bars][:2] == [
            ("2025-02-08", 0),
            ("2025-02-09", 0),
        ]
        assert len(chart.bars) == 31 and chart.bars[-1].quantity == 3
        assert chart.bars[-1].height == 150  # the tallest bar fills the plot
        assert chart.summary == (
            "Quantities sold per day from 2025-02-08 to 2025-03-10: 3 in all, the most on "
            "2025-03-10 (3). Days before 2025-02-08 are not shown."
        )
        assert chart_of([]) is None


class TestItems:
    async def test_items_show_their_owners_and_nfts(self, owner, client, database, tenant, chain):
        await fund(client, tenant, chain)
        product = await create_product(
            client, tenant, mint_nft=True, chain="WestendAssetHub", metadata_uri=METADATA
        )
        first, second = await create_users(client, tenant, 2)
        items = await issue_items(client, tenant, product["id"], first["id"], second["id"])
        await redeem(client, tenant, product["id"], items[1]["id"])
        async with orm.session(database) as session:  # as the worker leaves them
            await session.execute(
                update(ProductItem)
                .where(ProductItem.id == uuid.UUID(items[0]["id"]))
                .values(
                    nft_status="minted",
                    nft_tx_hash="0xabc123",
                    nft_block=9,
                    nft_transfer_status="failed",
                )
            )
            await session.commit()
        api = {i["id"]: i for i in await api_items(client, tenant, product["id"])}
        shown = await owner.get(product_page(tenant, product["id"]))
        assert row_of(shown.text, items[0]["id"]) == [
            "1", items[0]["id"], first["email"], "0 of 1", "minted", "0xabc123", "failed"
        ]  # fmt: skip
        assert row_of(shown.text, items[1]["id"]) == [
            "2", items[1]["id"], second["email"], "1 of 1", "queued", "", ""
        ]  # fmt: skip
        assert api[items[0]["id"]]["nft"]["status"] == "minted"
        assert api[items[1]["id"]]["nft"]["status"] == "queued"
        assert figures(shown.text)["Redeemed"] == "1"


class TestScope:
    async def test_another_projects_owner_gets_404_everywhere(
        self, owner, client, database, tenant, other
    ):
        theirs = await create_product(client, other)
        user = await create_user(client, other)
        elsewhere = f"/console/projects/{other.project_id}/products"
        before = await row_counts(database)
        for path in (elsewhere, f"{elsewhere}/{theirs['id']}"):
            assert (await owner.get(path)).status_code == 404
        for path, form in (
            (elsewhere, {"type": "admission", "name": "Mine"}),
            (f"{elsewhere}/{theirs['id']}", {"name": "Mine"}),
            (f"{elsewhere}/{theirs['id']}/items", {"emails": user["email"]}),
        ):
            assert (await owner.post(path, form)).status_code == 404
        # Their product under the owner's own project is not found either.
        mine = product_page(tenant, theirs["id"])
        assert (await owner.get(mine)).status_code == 404
        assert (await owner.post(mine, {"name": "Mine"})).status_code == 404
        assert (await owner.post(f"{mine}/items", {"emails": user["email"]})).status_code == 404
        assert await row_counts(database) == before
        assert await api_product(client, other, theirs["id"]) == theirs


class TestCsrf:
    async def test_a_forged_form_changes_nothing(self, owner, client, database, tenant):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        path = product_page(tenant, product["id"])
        before = await row_counts(database)
        for target, form in (
            (products_page(tenant), {"type": "admission", "name": "Forged"}),
            (path, {"name": "Forged"}),
            (f"{path}/items", {"emails": user["email"]}),
        ):
            forged = await owner.http.post(target, data=form | {"csrf": "not-the-token"})
            missing = await owner.http.post(target, data=form)
            assert forged.status_code == missing.status_code == 403
        assert await row_counts(database) == before
        assert await api_product(client, tenant, product["id"]) == product
