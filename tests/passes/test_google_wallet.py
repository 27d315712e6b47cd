"""A ticket's Google Wallet link: ``GET /tickets/{token}/google-wallet`` (no credential, the
token is one) redirects to Google Wallet's save page with a JWT (``typ: savetowallet``, RS256)
signed by the configured service account's key: it verifies with the key's public half, holds
the product's event ticket class and the ticket's object, whose QR code is the ticket's current
secret. A token the page refuses gets the page's 404; a server without Google Wallet settings
answers 404 naming them."""

import jwt
import pytest

from tests.factories import create_user, transfer_item
from tests.passes.ca import ISSUER_ID, SERVICE_ACCOUNT, StandInCa
from tests.tickets.test_ticket_page import (
    FESTIVAL,
    NOT_VALID,
    checked_headers,
    held,
    page,
    path_of,
    refusal,
    ticket_of,
)

SAVE = "https://pay.google.com/gp/v/save/"
GOOGLE_MISSING = (
    "Google Wallet is not set up here",
    [
        "Google Wallet links are not configured on this server: it needs "
        "TESSERA_GOOGLE_WALLET_ISSUER_ID and TESSERA_GOOGLE_WALLET_KEY_FILE."
    ],
)


async def saved(client, url: str, ca: StandInCa) -> dict:
    """The claims of the ticket's link, once its signature holds with the public key."""
    response = await client.get(path_of(url) + "/google-wallet")
    assert response.status_code == 303, response.text
    checked_headers(response)
    location = response.headers["location"]
    assert location.startswith(SAVE)
    token = location.removeprefix(SAVE)
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "RS256" and header["typ"] == "JWT" and len(header["kid"]) == 32
    claims: dict = jwt.decode(
        token,
        ca.google_public_key.read_bytes(),
        algorithms=["RS256"],
        audience="google",
        issuer=SERVICE_ACCOUNT,
        options={"require": ["iat", "iss", "aud"]},
    )
    return claims


class TestLink:
    async def test_a_held_tickets_link(self, client, tenant, stand_in_ca):
        product, _, item, ticket = await held(
            client, tenant, event=FESTIVAL, name="Weekend pass", type="admission"
        )
        claims = await saved(client, ticket["url"], stand_in_ca)
        assert claims["typ"] == "savetowallet"
        assert claims["iss"] == SERVICE_ACCOUNT and claims["aud"] == "google"
        [ticket_class] = claims["payload"]["eventTicketClasses"]
        [ticket_object] = claims["payload"]["eventTicketObjects"]
        class_id = f"{ISSUER_ID}.{product['id']}"
        assert ticket_class == {
            "id": class_id,
            "issuerName": "Acme",
            "reviewStatus": "UNDER_REVIEW",
            "eventName": {
                "defaultValue": {"language": "en-US", "value": "Harbour Lights Festival"}
            },
            "venue": {
                "name": {"defaultValue": {"language": "en-US", "value": "Quay 4"}},
                "address": {
                    "defaultValue": {"language": "en-US", "value": "Harbour Road 1, Rotterdam"}
                },
            },
            "dateTime": {"start": "2031-06-13T18:00:00+00:00", "end": "2031-06-15T23:00:00+00:00"},
        }
        assert ticket_object == {
            "id": f"{ISSUER_ID}.{item['id']}-1",
            "classId": class_id,
            "state": "ACTIVE",
            "ticketNumber": "1",
            "ticketHolderName": "Ada Lovelace",
            "barcode": {"type": "QR_CODE", "value": ticket["secret"], "alternateText": "#1"},
        }

    async def test_a_forged_link_does_not_verify(self, client, tenant, stand_in_ca):
        # The check the other tests rely on can fail: the same claims, signed by another key.
        *_, ticket = await held(client, tenant)
        response = await client.get(path_of(ticket["url"]) + "/google-wallet")
        token = response.headers["location"].removeprefix(SAVE)
        head, body, signature = token.split(".")
        forged = f"{head}.{body[:-4]}AAAA.{signature}"
        with pytest.raises(jwt.InvalidSignatureError):
            jwt.decode(
                forged,
                stand_in_ca.google_public_key.read_bytes(),
                algorithms=["RS256"],
                audience="google",
            )

    async def test_a_reissued_ticket_is_a_new_object(self, client, tenant, stand_in_ca):
        product, _, item, ticket = await held(client, tenant, event=FESTIVAL)
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/{item['item_id']}/ticket/reissue",
            headers=tenant.w,
        )
        assert reissued.status_code == 200, reissued.text
        old = page(await client.get(path_of(ticket["url"]) + "/google-wallet"), 404)
        assert refusal(old) == NOT_VALID
        new = reissued.json()
        claims = await saved(client, new["url"], stand_in_ca)
        [ticket_object] = claims["payload"]["eventTicketObjects"]
        assert ticket_object["id"] == f"{ISSUER_ID}.{item['id']}-2"
        assert ticket_object["barcode"]["value"] == new["secret"] != ticket["secret"]

    async def test_a_transferred_ticket_is_its_new_holders(self, client, tenant, stand_in_ca):
        product, sender, item, _ = await held(client, tenant, is_transferable=True)
        recipient = await create_user(client, tenant, firstName="Grace", lastName="Hopper")
        moved = await transfer_item(client, tenant, product["id"], item["id"], sender, recipient)
        assert moved.status_code == 200, moved.text
        now = await ticket_of(client, tenant, product["id"], item["item_id"])
        claims = await saved(client, now["url"], stand_in_ca)
        [ticket_object] = claims["payload"]["eventTicketObjects"]
        assert ticket_object["ticketHolderName"] == "Grace Hopper"
        assert ticket_object["barcode"]["value"] == now["secret"]
        [ticket_class] = claims["payload"]["eventTicketClasses"]
        assert "venue" not in ticket_class and "dateTime" not in ticket_class

    async def test_the_page_links_it(self, client, tenant):
        *_, ticket = await held(client, tenant, event=FESTIVAL)
        document = page(await client.get(path_of(ticket["url"])), 200)
        token = path_of(ticket["url"]).removeprefix("/tickets/")
        link = document.one("a", id="google-wallet")
        assert link.attrs["href"] == f"{token}/google-wallet"
        assert link.text == "Add to Google Wallet"

    @pytest.mark.parametrize(
        "token", ["x", "A" * 43, "7d3c1a52-5b0e-4f6a-9a43-0f0c2f4d8e11", "%C3%A9" * 43]
    )
    async def test_a_bad_token_is_the_ticket_pages_404(self, client, token):
        document = page(await client.get(f"/tickets/{token}/google-wallet"), 404)
        assert refusal(document) == NOT_VALID


class TestNotConfigured:
    async def test_404_naming_the_settings(self, plain, tenant):
        *_, ticket = await held(plain, tenant, event=FESTIVAL)
        document = page(await plain.get(path_of(ticket["url"]) + "/google-wallet"), 404)
        assert refusal(document) == GOOGLE_MISSING
