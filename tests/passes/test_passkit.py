"""The PassKit web service under ``/passkit/v1`` (Apple's "Wallet Passes Web Service"): a device
registers a pass with the pass's token (``Authorization: ApplePass``), asks which of its passes
changed since its tag, fetches the latest pass, unregisters, and sends its log. A reissued
ticket's pass shows up as changed and the latest pass carries the new secret; after a transfer
the earlier holder's device gets the pass voided. A wrong token gets 401, another pass type 404,
and a server without Apple Wallet settings 404 naming them."""

import io
import logging
import uuid

import pytest
from PIL import Image

from tessera.db import database_of
from tessera.passes.service import set_logo
from tests.factories import create_user, transfer_item
from tests.passes.ca import PASS_TYPE_ID
from tests.passes.pkpass import opened
from tests.passes.test_apple_pass import pkpass_of
from tests.tickets.test_ticket_page import FESTIVAL, held, ticket_of

DEVICE = "b33e3a3dccb3030333e3333da33333a3"
SOME_SERIAL = "7d3c1a52-5b0e-4f6a-9a43-0f0c2f4d8e11"
PUSH = {"pushToken": "f1e2d3c4b5a6" * 5}
WRONG = {
    "message": "a wallet pass's web service needs Authorization: ApplePass and the pass's token"
}


def registration(serial: str, device: str = DEVICE, pass_type: str = PASS_TYPE_ID) -> str:
    return f"/passkit/v1/devices/{device}/registrations/{pass_type}/{serial}"


def changes(device: str = DEVICE, pass_type: str = PASS_TYPE_ID) -> str:
    return f"/passkit/v1/devices/{device}/registrations/{pass_type}"


def latest(serial: str, pass_type: str = PASS_TYPE_ID) -> str:
    return f"/passkit/v1/passes/{pass_type}/{serial}"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"ApplePass {token}"}


async def a_pass(client, tenant, ca, scratch, **product) -> tuple[dict, dict, dict, dict]:
    """A held ticket (of the festival), and its pass as the holder adds it."""
    created, user, item, ticket = await held(client, tenant, event=FESTIVAL, **product)
    content = opened(await pkpass_of(client, ticket["url"]), ca, scratch)
    return created, user, item, content


async def registered(client, content: dict, device: str = DEVICE) -> None:
    response = await client.post(
        registration(content["serialNumber"], device),
        headers=auth(content["authenticationToken"]),
        json=PUSH,
    )
    assert response.status_code == 201, response.text


async def changed(client, tag: str | None = None, device: str = DEVICE):
    params = {} if tag is None else {"passesUpdatedSince": tag}
    return await client.get(changes(device), params=params)


class TestRegister:
    async def test_a_device_registers_a_pass_once(self, client, tenant, stand_in_ca, tmp_path):
        *_, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        await registered(client, content)
        again = await client.post(
            registration(content["serialNumber"]),
            headers=auth(content["authenticationToken"]),
            json={"pushToken": "another-token"},
        )
        assert again.status_code == 200
        assert again.content == b""

    @pytest.mark.parametrize(
        "headers",
        [
            {},
            {"Authorization": "ApplePass 00000000000000000000000000000000"},
            {"Authorization": "Bearer {token}"},
            {"Authorization": "ApplePass"},
        ],
    )
    async def test_a_wrong_token_gets_401(
        self, client, tenant, stand_in_ca, tmp_path, headers: dict[str, str]
    ):
        *_, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        sent = {k: v.format(token=content["authenticationToken"]) for k, v in headers.items()}
        response = await client.post(registration(content["serialNumber"]), headers=sent, json=PUSH)
        assert response.status_code == 401
        assert response.json() == WRONG
        assert (await changed(client)).status_code == 204  # nothing registered

    async def test_another_items_token_gets_401(self, client, tenant, stand_in_ca, tmp_path):
        *_, mine = await a_pass(client, tenant, stand_in_ca, tmp_path)
        *_, theirs = await a_pass(client, tenant, stand_in_ca, tmp_path)
        response = await client.post(
            registration(theirs["serialNumber"]),
            headers=auth(mine["authenticationToken"]),
            json=PUSH,
        )
        assert response.status_code == 401
        unknown = await client.post(
            registration(str(uuid.uuid4())), headers=auth(mine["authenticationToken"]), json=PUSH
        )
        assert unknown.status_code == 401
        assert unknown.json() == WRONG

    async def test_another_pass_type_gets_404(self, client, tenant, stand_in_ca, tmp_path):
        *_, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        response = await client.post(
            registration(content["serialNumber"], pass_type="pass.other.tickets"),
            headers=auth(content["authenticationToken"]),
            json=PUSH,
        )
        assert response.status_code == 404
        assert response.json() == {"message": "not this server's pass type"}

    async def test_a_bad_body_gets_400(self, client, tenant, stand_in_ca, tmp_path):
        *_, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        response = await client.post(
            registration(content["serialNumber"]),
            headers=auth(content["authenticationToken"]),
            json={"pushToken": ""},
        )
        assert response.status_code == 400
        assert response.json()["errors"][0].startswith("pushToken:")
        assert (await changed(client)).status_code == 204


class TestChanges:
    async def test_a_reissued_tickets_pass_is_updated(self, client, tenant, stand_in_ca, tmp_path):
        product, _, item, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        await registered(client, content)
        first = await changed(client)
        assert first.status_code == 200
        body = first.json()
        assert body["serialNumbers"] == [content["serialNumber"]]
        tag = body["lastUpdated"]
        assert tag.isdigit()
        # Nothing changed since that tag.
        assert (await changed(client, tag)).status_code == 204
        reissued = await client.post(
            f"/v1/products/{product['id']}/items/{item['item_id']}/ticket/reissue",
            headers=tenant.w,
        )
        assert reissued.status_code == 200, reissued.text
        after = await changed(client, tag)
        assert after.status_code == 200
        assert after.json()["serialNumbers"] == [content["serialNumber"]]
        assert int(after.json()["lastUpdated"]) > int(tag)
        # The latest pass, fetched with the token the device has, carries the new secret.
        response = await client.get(
            latest(content["serialNumber"]), headers=auth(content["authenticationToken"])
        )
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/vnd.apple.pkpass"
        assert response.headers["last-modified"].endswith(" GMT")
        new = opened(response.content, stand_in_ca, tmp_path)
        assert new["barcodes"][0]["message"] == reissued.json()["secret"]
        assert new["barcodes"][0]["message"] != content["barcodes"][0]["message"]
        assert new["authenticationToken"] == content["authenticationToken"]
        assert "voided" not in new

    async def test_a_rescheduled_events_passes_are_updated(
        self, client, tenant, stand_in_ca, tmp_path
    ):
        # What the pass shows comes from the event too: moving it changes the pass.
        product, *_, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        await registered(client, content)
        tag = (await changed(client)).json()["lastUpdated"]
        later = FESTIVAL["start_date"] + 7 * 86400
        moved = await client.put(
            "/v1/events/update",
            headers=tenant.w,
            json={"id": product["event_id"], "start_date": later, "end_date": later + 3600},
        )
        assert moved.status_code == 200, moved.text
        after = await changed(client, tag)
        assert after.status_code == 200
        assert after.json()["serialNumbers"] == [content["serialNumber"]]
        response = await client.get(
            latest(content["serialNumber"]), headers=auth(content["authenticationToken"])
        )
        new = opened(response.content, stand_in_ca, tmp_path)
        assert new["relevantDate"] == "2031-06-20T18:00:00+00:00"
        assert new["barcodes"] == content["barcodes"]  # the same ticket, the same secret

    async def test_a_new_logo_updates_the_projects_passes(
        self, client, tenant, wallet_app, stand_in_ca, tmp_path
    ):
        *_, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        await registered(client, content)
        tag = (await changed(client)).json()["lastUpdated"]
        logo = io.BytesIO()
        Image.new("RGB", (60, 60), (200, 0, 0)).save(logo, "PNG")
        database = database_of(wallet_app)
        await set_logo(database, project_id=tenant.project_id, png=logo.getvalue())
        after = await changed(client, tag)
        assert after.json()["serialNumbers"] == [content["serialNumber"]]
        # Taking the logo away is a change too.
        tag = after.json()["lastUpdated"]
        await set_logo(database, project_id=tenant.project_id, png=None)
        assert (await changed(client, tag)).json()["serialNumbers"] == [content["serialNumber"]]

    async def test_only_the_devices_own_passes(self, client, tenant, stand_in_ca, tmp_path):
        *_, mine = await a_pass(client, tenant, stand_in_ca, tmp_path)
        *_, theirs = await a_pass(client, tenant, stand_in_ca, tmp_path)
        await registered(client, mine)
        await registered(client, theirs, device="another-device")
        assert (await changed(client)).json()["serialNumbers"] == [mine["serialNumber"]]
        listed = (await changed(client, device="another-device")).json()["serialNumbers"]
        assert listed == [theirs["serialNumber"]]
        assert (await changed(client, device="a-device-never-seen")).status_code == 204

    @pytest.mark.parametrize("tag", ["", "yesterday", "-5", "9" * 40])
    async def test_a_tag_it_did_not_give_lists_them_all(
        self, client, tenant, stand_in_ca, tmp_path, tag: str
    ):
        *_, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        await registered(client, content)
        response = await changed(client, tag)
        assert response.status_code == 200
        assert response.json()["serialNumbers"] == [content["serialNumber"]]

    async def test_a_transfer_voids_the_earlier_holders_pass(
        self, client, tenant, stand_in_ca, tmp_path
    ):
        product, sender, item, content = await a_pass(
            client, tenant, stand_in_ca, tmp_path, is_transferable=True
        )
        await registered(client, content)
        tag = (await changed(client)).json()["lastUpdated"]
        recipient = await create_user(client, tenant, firstName="Grace", lastName="Hopper")
        moved = await transfer_item(client, tenant, product["id"], item["id"], sender, recipient)
        assert moved.status_code == 200, moved.text
        assert (await changed(client, tag)).json()["serialNumbers"] == [content["serialNumber"]]
        response = await client.get(
            latest(content["serialNumber"]), headers=auth(content["authenticationToken"])
        )
        assert response.status_code == 200, response.text
        voided = opened(response.content, stand_in_ca, tmp_path)
        assert voided["voided"] is True
        assert "barcodes" not in voided
        assert voided["eventTicket"]["secondaryFields"][0]["value"] == "Ada Lovelace"
        back = {field["key"]: field["value"] for field in voided["eventTicket"]["backFields"]}
        assert back["voided"] == "This ticket was passed on to someone else."
        assert "secret" not in back
        # The earlier holder's token registers nothing new, and the new holder's pass is theirs.
        again = await client.post(
            registration(content["serialNumber"], device="ada-new-phone"),
            headers=auth(content["authenticationToken"]),
            json=PUSH,
        )
        assert again.status_code == 401
        now = await ticket_of(client, tenant, product["id"], item["item_id"])
        theirs = opened(await pkpass_of(client, now["url"]), stand_in_ca, tmp_path)
        assert theirs["barcodes"][0]["message"] == now["secret"]
        await registered(client, theirs, device="grace-phone")

    async def test_a_wrong_token_gets_no_pass(self, client, tenant, stand_in_ca, tmp_path):
        *_, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        for headers in ({}, auth("0" * 32), auth(content["authenticationToken"] + "0")):
            response = await client.get(latest(content["serialNumber"]), headers=headers)
            assert response.status_code == 401
            assert response.json() == WRONG
        other = await client.get(
            latest(str(uuid.uuid4())), headers=auth(content["authenticationToken"])
        )
        assert other.status_code == 401
        wrong_type = await client.get(
            latest(content["serialNumber"], pass_type="pass.other.tickets"),
            headers=auth(content["authenticationToken"]),
        )
        assert wrong_type.status_code == 404


class TestUnregister:
    async def test_a_device_unregisters(self, client, tenant, stand_in_ca, tmp_path):
        *_, content = await a_pass(client, tenant, stand_in_ca, tmp_path)
        await registered(client, content)
        wrong = await client.delete(registration(content["serialNumber"]), headers=auth("0" * 32))
        assert wrong.status_code == 401
        assert (await changed(client)).status_code == 200
        gone = await client.delete(
            registration(content["serialNumber"]), headers=auth(content["authenticationToken"])
        )
        assert gone.status_code == 200
        assert (await changed(client)).status_code == 204

    async def test_an_earlier_holders_device_unregisters(
        self, client, tenant, stand_in_ca, tmp_path
    ):
        product, sender, item, content = await a_pass(
            client, tenant, stand_in_ca, tmp_path, is_transferable=True
        )
        await registered(client, content)
        recipient = await create_user(client, tenant)
        moved = await transfer_item(client, tenant, product["id"], item["id"], sender, recipient)
        assert moved.status_code == 200, moved.text
        gone = await client.delete(
            registration(content["serialNumber"]), headers=auth(content["authenticationToken"])
        )
        assert gone.status_code == 200
        assert (await changed(client)).status_code == 204


class TestLog:
    async def test_device_logs_reach_the_servers_log(self, client, caplog):
        lines = ["Web service error for pass.test: 500", "line\ntwo", "x" * 2000]
        with caplog.at_level(logging.WARNING, logger="tessera.passes"):
            response = await client.post("/passkit/v1/log", json={"logs": lines})
        assert response.status_code == 200
        logged = [r.getMessage() for r in caplog.records if r.name == "tessera.passes"]
        assert logged == [
            "wallet device: Web service error for pass.test: 500",
            "wallet device: line two",
            "wallet device: " + "x" * 500,
        ]

    async def test_a_log_that_is_not_a_list(self, client):
        response = await client.post("/passkit/v1/log", json={"logs": "nope"})
        assert response.status_code == 400


class TestNotConfigured:
    @pytest.mark.parametrize(
        ("method", "path"),
        [
            ("POST", registration(SOME_SERIAL)),
            ("DELETE", registration(SOME_SERIAL)),
            ("GET", changes()),
            ("GET", latest(SOME_SERIAL)),
            ("POST", "/passkit/v1/log"),
        ],
    )
    async def test_404_naming_the_settings(self, plain, method: str, path: str):
        body = PUSH if path.endswith("/log") is False and method == "POST" else {"logs": []}
        response = await plain.request(
            method, path, headers=auth("0" * 32), json=body if method == "POST" else None
        )
        assert response.status_code == 404
        assert response.json() == {
            "message": "Apple Wallet passes are not configured on this server: it needs "
            "TESSERA_APPLE_PASS_TYPE_ID, TESSERA_APPLE_TEAM_ID, TESSERA_APPLE_PASS_CERTIFICATE, "
            "TESSERA_APPLE_PASS_KEY and TESSERA_APPLE_WWDR_CERTIFICATE"
        }
