"""A ticket's Apple Wallet pass: ``GET /tickets/{token}/pass.pkpass`` (no credential, the token
is one) is a ``.pkpass`` that unzips to ``pass.json``, its images, ``manifest.json`` and
``signature``; every manifest hash matches, OpenSSL accepts the signature against the CA
standing in for Apple, and the QR code is the ticket's current secret. The ticket page links
to it. A token the page refuses gets the page's 404; a server without Apple Wallet settings
answers 404 naming them, and its pages show no link."""

import io
import json

import pytest
from PIL import Image

from tessera.db import database_of
from tessera.passes.service import set_logo
from tests.factories import create_user, transfer_item
from tests.passes.ca import PASS_TYPE_ID, TEAM_ID, StandInCa
from tests.passes.pkpass import IMAGES, files_of, opened
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

APPLE_MISSING = (
    "Apple Wallet passes are not set up here",
    [
        "Apple Wallet passes are not configured on this server: it needs "
        "TESSERA_APPLE_PASS_TYPE_ID, TESSERA_APPLE_TEAM_ID, TESSERA_APPLE_PASS_CERTIFICATE, "
        "TESSERA_APPLE_PASS_KEY and TESSERA_APPLE_WWDR_CERTIFICATE."
    ],
)


async def pkpass_of(client, url: str) -> bytes:
    response = await client.get(path_of(url) + "/pass.pkpass")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/vnd.apple.pkpass"
    assert response.headers["content-disposition"] == 'attachment; filename="ticket.pkpass"'
    assert response.headers["last-modified"].endswith(" GMT")
    checked_headers(response)
    return response.content


def png(colour: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


class TestPass:
    async def test_a_held_tickets_pass(self, client, tenant, stand_in_ca: StandInCa, tmp_path):
        product, _, item, ticket = await held(
            client, tenant, event=FESTIVAL, name="Weekend pass", type="admission"
        )
        content = opened(await pkpass_of(client, ticket["url"]), stand_in_ca, tmp_path)
        [barcode] = content["barcodes"]
        assert barcode == {
            "format": "PKBarcodeFormatQR",
            "message": ticket["secret"],
            "messageEncoding": "iso-8859-1",
            "altText": "#1",
        }
        token = content.pop("authenticationToken")
        assert len(token) == 32 and int(token, 16) >= 0
        ticket_fields = content.pop("eventTicket")
        assert content == {
            "formatVersion": 1,
            "passTypeIdentifier": PASS_TYPE_ID,
            "teamIdentifier": TEAM_ID,
            "serialNumber": item["id"],
            "organizationName": "Acme",
            "description": "Ticket: Harbour Lights Festival",
            "webServiceURL": "http://tessera.test/passkit",
            "sharingProhibited": True,
            "relevantDate": "2031-06-13T18:00:00+00:00",
            "expirationDate": "2031-06-15T23:00:00+00:00",
            "barcodes": [barcode],
        }
        assert ticket_fields["primaryFields"] == [
            {"key": "event", "label": "EVENT", "value": "Harbour Lights Festival"}
        ]
        assert ticket_fields["secondaryFields"] == [
            {"key": "holder", "label": "HOLDER", "value": "Ada Lovelace"},
            {"key": "item", "label": "ITEM", "value": "#1"},
        ]
        assert ticket_fields["auxiliaryFields"] == [
            {
                "key": "starts",
                "label": "STARTS",
                "value": "2031-06-13T18:00:00+00:00",
                "dateStyle": "PKDateStyleMedium",
                "timeStyle": "PKDateStyleShort",
            },
            {"key": "place", "label": "PLACE", "value": "Quay 4, Harbour Road 1, Rotterdam"},
        ]
        back = {field["key"]: field["value"] for field in ticket_fields["backFields"]}
        assert back == {"product": "Weekend pass", "secret": ticket["secret"]}
        assert product["name"] == "Weekend pass"

    async def test_the_images_are_pngs_of_apples_sizes(self, client, tenant):
        *_, ticket = await held(client, tenant)
        files = files_of(await pkpass_of(client, ticket["url"]))
        for name, size in IMAGES.items():
            with Image.open(io.BytesIO(files[name])) as image:
                assert image.format == "PNG", name
                if name.startswith("icon"):
                    assert image.size == size, name
                else:  # a logo is at most that wide and high
                    assert image.width <= size[0] and image.height <= size[1], name
                    assert max(image.width / size[0], image.height / size[1]) > 0.99, name

    async def test_the_projects_logo(self, client, tenant, wallet_app):
        *_, ticket = await held(client, tenant)
        mark = files_of(await pkpass_of(client, ticket["url"]))
        await set_logo(
            database_of(wallet_app), project_id=tenant.project_id, png=png((200, 0, 0), (400, 100))
        )
        files = files_of(await pkpass_of(client, ticket["url"]))
        assert files["icon.png"] != mark["icon.png"]
        with Image.open(io.BytesIO(files["logo@2x.png"])) as logo:
            assert logo.size == (320, 80)  # 4:1 fits the width
            assert logo.convert("RGB").getpixel((160, 40)) == (200, 0, 0)
        with Image.open(io.BytesIO(files["icon.png"])) as icon:
            assert icon.size == (29, 29)
            assert icon.convert("RGBA").getpixel((14, 14))[:3] == (200, 0, 0)
            assert icon.convert("RGBA").getpixel((14, 0))[3] == 0  # transparent around it
        await set_logo(database_of(wallet_app), project_id=tenant.project_id, png=None)
        assert files_of(await pkpass_of(client, ticket["url"]))["icon.png"] == mark["icon.png"]

    async def test_a_small_logo_is_scaled_up(self, client, tenant, wallet_app):
        *_, ticket = await held(client, tenant)
        await set_logo(
            database_of(wallet_app), project_id=tenant.project_id, png=png((0, 90, 0), (40, 10))
        )
        files = files_of(await pkpass_of(client, ticket["url"]))
        for name, size in (("logo@3x.png", (480, 120)), ("icon@3x.png", (87, 87))):
            with Image.open(io.BytesIO(files[name])) as image:
                assert image.size == size, name

    async def test_a_product_without_event(self, client, tenant, stand_in_ca, tmp_path):
        *_, ticket = await held(client, tenant, name="Drink voucher")
        content = opened(await pkpass_of(client, ticket["url"]), stand_in_ca, tmp_path)
        assert content["description"] == "Ticket: Drink voucher"
        assert content["eventTicket"]["primaryFields"][0]["value"] == "Drink voucher"
        assert content["eventTicket"]["auxiliaryFields"] == []
        assert "relevantDate" not in content and "expirationDate" not in content
        assert content["barcodes"][0]["message"] == ticket["secret"]

    async def test_a_tampered_manifest_fails_the_signature(
        self, client, tenant, stand_in_ca: StandInCa, tmp_path
    ):
        # The check the other tests rely on can fail: one byte of the manifest changed.
        *_, ticket = await held(client, tenant)
        files = files_of(await pkpass_of(client, ticket["url"]))
        manifest = json.loads(files["manifest.json"])
        manifest["pass.json"] = "0" * 40
        tampered = json.dumps(manifest, sort_keys=True).encode()
        verdict = stand_in_ca.verified(files["signature"], tampered, tmp_path)
        assert verdict.returncode != 0
        assert "Verification failure" in verdict.stderr

    async def test_the_page_links_it(self, client, tenant):
        *_, ticket = await held(client, tenant, event=FESTIVAL)
        document = page(await client.get(path_of(ticket["url"])), 200)
        token = path_of(ticket["url"]).removeprefix("/tickets/")
        link = document.one("a", id="apple-wallet")
        assert link.attrs["href"] == f"{token}/pass.pkpass"
        assert link.text == "Add to Apple Wallet"


class TestRefused:
    async def test_a_reissued_tickets_old_pass_address(self, client, tenant, stand_in_ca, tmp_path):
        product, _, item, ticket = await held(client, tenant, event=FESTIVAL)
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/{item['item_id']}/ticket/reissue",
            headers=tenant.w,
        )
        assert reissued.status_code == 200, reissued.text
        document = page(await client.get(path_of(ticket["url"]) + "/pass.pkpass"), 404)
        assert refusal(document) == NOT_VALID
        new = reissued.json()
        content = opened(await pkpass_of(client, new["url"]), stand_in_ca, tmp_path)
        assert content["barcodes"][0]["message"] == new["secret"] != ticket["secret"]
        assert content["serialNumber"] == item["id"]  # the same pass, kept current

    async def test_a_transferred_tickets_pass_is_its_new_holders(
        self, client, tenant, stand_in_ca, tmp_path
    ):
        product, sender, item, ticket = await held(client, tenant, is_transferable=True)
        first = opened(await pkpass_of(client, ticket["url"]), stand_in_ca, tmp_path)
        recipient = await create_user(client, tenant, firstName="Grace", lastName="Hopper")
        moved = await transfer_item(client, tenant, product["id"], item["id"], sender, recipient)
        assert moved.status_code == 200, moved.text
        assert (await client.get(path_of(ticket["url"]) + "/pass.pkpass")).status_code == 404
        now = await ticket_of(client, tenant, product["id"], item["item_id"])
        second = opened(await pkpass_of(client, now["url"]), stand_in_ca, tmp_path)
        assert second["eventTicket"]["secondaryFields"][0]["value"] == "Grace Hopper"
        assert second["barcodes"][0]["message"] == now["secret"]
        # A token of the new holder's own: the old holder's devices cannot fetch this pass.
        assert second["authenticationToken"] != first["authenticationToken"]

    @pytest.mark.parametrize(
        "token",
        ["x", "A" * 43, "not%20a%20token", "7d3c1a52-5b0e-4f6a-9a43-0f0c2f4d8e11", "%C3%A9" * 43],
    )
    async def test_a_bad_token_is_the_ticket_pages_404(self, client, token):
        document = page(await client.get(f"/tickets/{token}/pass.pkpass"), 404)
        assert refusal(document) == NOT_VALID


class TestNotConfigured:
    async def test_the_pass_answers_404_naming_the_settings(self, plain, tenant):
        *_, ticket = await held(plain, tenant, event=FESTIVAL)
        document = page(await plain.get(path_of(ticket["url"]) + "/pass.pkpass"), 404)
        assert refusal(document) == APPLE_MISSING
        # Whatever the token: the answer says nothing of tickets.
        document = page(await plain.get("/tickets/x/pass.pkpass"), 404)
        assert refusal(document) == APPLE_MISSING

    async def test_the_page_shows_no_wallet_link(self, plain, tenant):
        *_, ticket = await held(plain, tenant, event=FESTIVAL)
        document = page(await plain.get(path_of(ticket["url"])), 200)
        assert document.all("a", id="apple-wallet") == []
        assert document.all("a", id="google-wallet") == []
        assert document.one("a", id="pdf").text == "Print this ticket (PDF)"
