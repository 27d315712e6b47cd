"""The console's seat map of an event, in a real browser (headless Chromium) on a real
``tessera serve``, under the console's content security policy: the plan drawn as SVG by the
server, each seat coloured by its status (a legend with each status's count), a seat chosen on
the map blocked and unblocked, and axe-core finds nothing serious. The console's own fixtures
(its server, its operator) are test_console.py's.

A screenshot goes to artifacts/screenshots/console-seat-map.png (not committed).
"""

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from tests.browser.test_claim_page import serious_violations
from tests.browser.test_console import (  # noqa: F401 - the fixtures, used by name
    Server,
    Visitor,
    go,
    person,
    screenshot,
    server,
    sign_in,
    submit,
    visitor,
)

pytestmark = pytest.mark.browser

# Stalls: rows A and B of 8 seats; Balcony: one row of 6 (no x/y: drawn as a grid).
PLAN = {
    "areas": [
        {
            "name": name,
            "rows": [
                {
                    "name": row,
                    "seats": [{"number": str(n), "category": "all"} for n in range(1, count + 1)],
                }
                for row, count in rows
            ],
        }
        for name, rows in (("Stalls", [("A", 8), ("B", 8)]), ("Balcony", [("A", 6)]))
    ]
}


async def seated_event(served: Server) -> dict[str, Any]:
    """An event with the plan, a seated product, 2 seats sold, 3 held and 1 blocked."""
    async with served.api(served.other_key) as api:

        async def ok(method: str, path: str, body: Any) -> Any:
            answer = await api.request(method, path, json=body)
            assert answer.status_code in (200, 201), answer.text
            return answer.json()

        event = await ok(
            "POST",
            "/v1/events/create",
            {
                "name": "Seat Map Night",
                "location": "Hall 3",
                "address": "Main Street 5",
                "start_date": 1938100000,
                "end_date": 1938110000,
            },
        )
        plan = await ok("PUT", f"/v1/events/{event['id']}/seating", PLAN)
        product = await ok(
            "POST",
            "/v1/products",
            {"type": "admission", "name": "Seat", "event_id": event["id"], "seat_category": "all"},
        )
        await ok("POST", "/v1/users/create", [{"email": "sam@example.com", "firstName": "Sam"}])
        sold = await ok("POST", "/v1/seat-holds", {"product_id": product["id"], "count": 2})
        await ok(
            "POST",
            "/v1/orders",
            {
                "user": {"email": "sam@example.com"},
                "items": [{"product_id": product["id"], "quantity": 2, "hold_id": sold["id"]}],
            },
        )
        await ok("POST", "/v1/seat-holds", {"product_id": product["id"], "count": 3})
        balcony = plan["areas"][1]["rows"][0]["seats"]
        await ok("PATCH", f"/v1/events/{event['id']}/seats/{balcony[5]['id']}", {"blocked": True})
    return {"event": event, "plan": plan, "balcony": balcony}


async def legend(page: Page) -> dict[str, int]:
    return {
        status: int(await page.locator(f"#count-{status}").inner_text())
        for status in ("available", "held", "sold", "blocked")
    }


async def test_the_seat_map_shows_each_status_and_blocks_a_seat(
    browser: Browser,
    server: Server,  # noqa: F811 - test_console's fixture
    person: Visitor,  # noqa: F811 - test_console's fixture
    axe_script: Path,
) -> None:
    seated = await seated_event(server)
    page = person.page
    await sign_in(page, server)
    path = f"/console/projects/{server.other_project_id}/events/{seated['event']['id']}"
    await go(page, f"{server.url}{path}")
    await page.get_by_role("link", name="Seat map").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Seats of Seat Map Night")

    seat_map = page.locator("svg#seat-map")
    await expect(seat_map).to_be_visible()
    assert await legend(page) == {"available": 16, "held": 3, "sold": 2, "blocked": 1}
    circles = seat_map.locator("circle")
    await expect(circles).to_have_count(22)
    drawn = await circles.evaluate_all("(all) => all.map((c) => c.dataset.status)")
    assert {s: drawn.count(s) for s in set(drawn)} == {
        "available": 16,
        "held": 3,
        "sold": 2,
        "blocked": 1,
    }
    # Each status has a colour of its own, as the legend shows it.
    fills = await circles.evaluate_all(
        "(all) => Object.fromEntries(all.map((c) => [c.dataset.status, getComputedStyle(c).fill]))"
    )
    assert len(set(fills.values())) == 4, fills
    await expect(page.locator(".seat-map text")).to_contain_text(["Stalls", "A", "B", "Balcony"])
    await screenshot(page, "seat-map", full_page=True)

    # Balcony A-1, chosen on the map, blocked; then unblocked.
    first = seated["balcony"][0]
    await page.get_by_role("link", name="Balcony row A seat 1: available").click()
    await expect(page.locator("#chosen")).to_have_text("Balcony, row A, seat 1")
    await submit(page, page.get_by_role("button", name="Block this seat"), 303)
    await expect(page.locator(".notice")).to_contain_text("Seat Balcony A-1 is blocked.")
    assert await legend(page) == {"available": 15, "held": 3, "sold": 2, "blocked": 2}
    await expect(seat_map.locator(f"a[href$='{first['id']}'] circle")).to_have_attribute(
        "data-status", "blocked"
    )
    await submit(page, page.get_by_role("button", name="Unblock this seat"), 303)
    assert await legend(page) == {"available": 16, "held": 3, "sold": 2, "blocked": 1}
    # A sold seat offers no button.
    await page.locator("circle[data-status='sold']").first.click()
    await expect(page.locator("main")).to_contain_text("A sold seat is neither blocked")
    await expect(page.get_by_role("button", name="Block this seat")).to_have_count(0)

    # axe, in a context of its own that sets the CSP aside for its script.
    checked = await visitor(browser, bypass_csp=True)
    try:
        await sign_in(checked.page, server)
        await go(checked.page, f"{server.url}{path}/seats")
        assert await serious_violations(checked.page, axe_script) == []
    finally:
        assert checked.context is not None
        await checked.context.close()
