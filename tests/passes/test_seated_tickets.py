"""A seated product's ticket says its seat wherever the ticket is shown: the page, the PDF, the
Apple pass (its seat fields and the semantic tags a Wallet reads out) and the Google object's
``seatInfo``. A ticket without a seat shows none of them."""

from pathlib import Path

from tests.factories import Tenant, create_event, create_product, create_user
from tests.passes.ca import StandInCa
from tests.passes.pkpass import opened
from tests.passes.test_apple_pass import pkpass_of
from tests.passes.test_google_wallet import saved
from tests.tickets import pdf
from tests.tickets.test_ticket_page import FESTIVAL, path_of, ticket_of


async def seated_ticket(client, tenant: Tenant) -> dict:
    """Ada's ticket for seat Stalls, row C, seat 7 (the only seat of its category)."""
    event = await create_event(client, tenant, **FESTIVAL)
    plan = {
        "areas": [
            {
                "name": "Stalls",
                "rows": [{"name": "C", "seats": [{"number": "7", "category": "front"}]}],
            }
        ]
    }
    answer = await client.put(f"/v1/events/{event['id']}/seating", headers=tenant.w, json=plan)
    assert answer.status_code == 200, answer.text
    product = await create_product(
        client, tenant, event_id=event["id"], seat_category="front", name="Stalls seat"
    )
    user = await create_user(client, tenant, firstName="Ada", lastName="Lovelace")
    hold = await client.post(
        "/v1/seat-holds", headers=tenant.w, json={"product_id": product["id"], "count": 1}
    )
    assert hold.status_code == 201, hold.text
    issued = await client.post(
        f"/v1/products/{product['id']}/items",
        headers=tenant.w,
        json={"users": [user["id"]], "hold_id": hold.json()["id"]},
    )
    assert issued.status_code == 201, issued.text
    [item] = issued.json()["items"]
    assert item["seat"] == hold.json()["seats"][0]
    return await ticket_of(client, tenant, product["id"], item["item_id"])


async def test_the_seat_is_on_the_page_the_pdf_and_both_wallets(
    client, tenant: Tenant, stand_in_ca: StandInCa, tmp_path: Path
) -> None:
    ticket = await seated_ticket(client, tenant)
    page = await client.get(path_of(ticket["url"]))
    assert '<dd id="seat">Stalls, row C, seat 7</dd>' in page.text

    printed = await client.get(path_of(ticket["url"]) + "/ticket.pdf")
    assert printed.status_code == 200
    assert "Seat: Stalls, row C, seat 7" in pdf.text(printed.content)

    content = opened(await pkpass_of(client, ticket["url"]), stand_in_ca, tmp_path)
    fields = {f["key"]: f["value"] for f in content["eventTicket"]["secondaryFields"]}
    assert (fields["section"], fields["row"], fields["seat"]) == ("Stalls", "C", "7")
    assert content["semantics"]["seats"] == [
        {"seatSection": "Stalls", "seatRow": "C", "seatNumber": "7"}
    ]

    claims = await saved(client, ticket["url"], stand_in_ca)
    [ticket_object] = claims["payload"]["eventTicketObjects"]
    assert {k: v["defaultValue"]["value"] for k, v in ticket_object["seatInfo"].items()} == {
        "section": "Stalls",
        "row": "C",
        "seat": "7",
    }


async def test_a_ticket_without_a_seat_shows_none(
    client, tenant: Tenant, stand_in_ca: StandInCa, tmp_path: Path
) -> None:
    event = await create_event(client, tenant, **FESTIVAL)
    product = await create_product(client, tenant, event_id=event["id"])
    user = await create_user(client, tenant)
    issued = await client.post(
        f"/v1/products/{product['id']}/items", headers=tenant.w, json={"users": [user["id"]]}
    )
    [item] = issued.json()["items"]
    assert "seat" not in item
    ticket = await ticket_of(client, tenant, product["id"], item["item_id"])
    assert 'id="seat"' not in (await client.get(path_of(ticket["url"]))).text
    printed = await client.get(path_of(ticket["url"]) + "/ticket.pdf")
    assert "Seat:" not in pdf.text(printed.content)
    content = opened(await pkpass_of(client, ticket["url"]), stand_in_ca, tmp_path)
    assert "semantics" not in content
    assert {f["key"] for f in content["eventTicket"]["secondaryFields"]} == {"holder", "item"}
    claims = await saved(client, ticket["url"], stand_in_ca)
    assert "seatInfo" not in claims["payload"]["eventTicketObjects"][0]
