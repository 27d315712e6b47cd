"""A project with something of everything in it, made through a Tessera's API, and every read
of it: what the previous release is given to keep (``build``), what each server answers about it
(``snapshot``), and where two answers differ (``differences``)."""

import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from substrateinterface import Keypair, KeypairType

from tests.passes.ca import PASS_TYPE_ID

PUBLIC_URL = "https://tickets.example.test"
DEVICE = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
START = int(datetime(2031, 6, 13, 18, tzinfo=UTC).timestamp())

Answers = dict[str, Any]


class Api:
    """A project's API at a server: each call names the status it expects, and answers the
    body."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def __call__(
        self, method: str, path: str, status: int, body: object = None, **more: Any
    ) -> Any:
        response = self.client.request(method, path, json=body, **more)
        assert response.status_code == status, f"{method} {path}: {response.text}"
        return response.json() if response.content else None


def build(base: str, api_key: str, *, fund: Callable[[str], object]) -> dict[str, Any]:
    """Something of everything a project holds, made through a server's API; what it made,
    for ``snapshot`` and the later requests. ``fund``: gives the project wallet (an address)
    what an NFT collection's deposit needs on the chain."""
    with httpx.Client(base_url=base, headers={"x-api-key": api_key}, timeout=30) as client:
        send = Api(client)
        [wallet] = send("GET", "/v1/projects/wallets", 200)
        fund(wallet["address"])
        users = send("POST", "/v1/users/create", 201, [person(name) for name in PEOPLE])["users"]
        ada, bob, cy = (user["id"] for user in users)
        send("POST", "/v1/users/activate", 200, {"id": ada})
        send("POST", "/v1/users/reputation", 201, {"id": bob, "delta": 5, "reason": "early bird"})
        hold_a_wallet(send, users[2])
        event = send("POST", "/v1/events/create", 201, EVENT)["id"]
        send("POST", "/v1/events/attendees/register", 200, {"event_id": event, "user_id": bob})
        ticket, drinks, nft = products(send, event)
        send("POST", f"/v1/products/{nft}/items", 201, {"users": [ada, bob]})
        [voucher] = send("POST", f"/v1/products/{drinks}/items", 201, {"users": [bob]})["items"]
        redeem = {"product_item_id": voucher["id"], "nonce": "bar-1"}
        send("POST", f"/v1/products/{drinks}/items/redeem", 200, redeem)
        [ada_ticket] = send("POST", f"/v1/products/{ticket}/items", 201, {"users": [ada]})["items"]
        passed_on = door(send, event, ticket, ada_ticket["id"], sender=ada, recipient=cy)
        order_key = {"idempotency-key": "upgrade-order-1"}
        order = send("POST", "/v1/orders", 201, order_body(ticket), headers=order_key)
        pending = {"user": {"id": ada}, "items": [{"product_id": drinks, "quantity": 1}]}
        send("POST", "/v1/orders", 201, pending | {"status": "pending"})
        cancelled = send("POST", "/v1/orders", 201, pending | {"status": "pending"})["id"]
        send("POST", f"/v1/orders/{cancelled}/cancel", 200)
        bob_ticket = offline_door(send, event, ticket, bob)
        token = claim_links(send, base, ticket)
        hook = {"url": "http://127.0.0.1:9/tessera", "event_types": ["order.completed"]}
        webhook = send("POST", "/v1/webhooks", 201, hook)["id"]
        wallet_pass = registered_pass(client, bob_ticket["url"])
    assert passed_on["status"] == "ok"
    return {
        "headers": {"x-api-key": api_key},
        "event": event,
        "products": [ticket, drinks, nft],
        "claim_token": token,
        "webhook": webhook,
        "order_key": order_key,
        "order_body": order_body(ticket),
        "order": order,
        "pass": wallet_pass,
    }


def products(send: Api, event: str) -> tuple[str, str, str]:
    """A ticket of the event that may change hands and be claimed, a drinks voucher good for
    two rounds, and a collectible of the event minted as an NFT."""
    admission = {"type": "admission", "event_id": event, "price": "25.00", "stock": 100}
    ticket = admission | {"name": "Harbour pass", "is_transferable": True, "is_claimable": True}
    drinks = {"type": "perks", "name": "Drinks", "redemption_quantity": 2}
    nft = admission | {
        "name": "Harbour collectible",
        "mint_nft": True,
        "chain": "AssetHub",
        "metadata_uri": "ipfs://bafytessera/upgrade.json",
        "max_items": 10,
    }
    made = [send("POST", "/v1/products", 201, body)["id"] for body in (ticket, drinks, nft)]
    return made[0], made[1], made[2]


def door(send: Api, event: str, product: str, item: str, *, sender: str, recipient: str) -> Any:
    """The ticket passes from sender to recipient, whose new secret is scanned at the door,
    and the sender's earlier one is refused: the answer of the scan let in."""
    ticket = f"/v1/products/{product}/items/{item}/ticket"
    earlier = send("GET", ticket, 200)["secret"]
    passed_on = {"product_item_id": item, "sender_user_id": sender, "recipient_user_id": recipient}
    send("POST", f"/v1/products/{product}/transfer", 200, passed_on)
    scan = {"secret": send("GET", ticket, 200)["secret"], "nonce": "door-1-0001", "event_id": event}
    let_in = send("POST", "/v1/checkins", 200, scan)
    stale = {"secret": earlier, "nonce": "door-1-0002", "event_id": event}
    assert send("POST", "/v1/checkins", 409, stale)["reason"] == "revoked"
    return let_in


def offline_door(send: Api, event: str, product: str, holder: str) -> Any:
    """A door that scanned the holder's first ticket offline uploads the scan: the ticket."""
    held = send("GET", f"/v1/products/{product}/items", 200, params={"owner_id": holder})
    ticket = send("GET", f"/v1/products/{product}/items/{held['items'][0]['id']}/ticket", 200)
    offline = {
        "secret": ticket["secret"],
        "nonce": "door-2-0001",
        "device": "door-2",
        "event_id": event,
        "scanned_at": (datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
    }
    [uploaded] = send("POST", "/v1/checkins/batch", 200, {"scans": [offline]})["results"]
    assert uploaded["status"] == "ok", uploaded
    return ticket


def claim_links(send: Api, base: str, product: str) -> str:
    """A link a person claims an item through (its token), and a link revoked."""
    links = f"/v1/products/{product}/claim-links"
    link = {"max_claims": 3, "expires_at": START, "reference_id": "welcome"}
    token = send("POST", links, 201, link)["token"]
    person = {"email": "dee@example.com", "firstName": "Dee"}
    claimed = httpx.post(f"{base}/v1/claims/{token}", json=person, timeout=10)  # no credential
    assert claimed.status_code == 201, claimed.text
    revoked = send("POST", links, 201, {"max_claims": 1})["id"]
    send("DELETE", f"{links}/{revoked}", 200)
    return str(token)


def registered_pass(client: httpx.Client, ticket_url: str) -> dict[str, str]:
    """The Apple Wallet pass of a ticket, as a device adds it and registers for its updates:
    its serial and token."""
    pkpass = client.get(urlsplit(ticket_url).path + "/pass.pkpass")
    assert pkpass.status_code == 200, pkpass.text
    content = pass_json(pkpass.content)
    serial, token = content["serialNumber"], content["authenticationToken"]
    registered = client.post(
        f"/passkit/v1/devices/{DEVICE}/registrations/{PASS_TYPE_ID}/{serial}",
        headers={"authorization": f"ApplePass {token}"},
        json={"pushToken": "f1e2d3c4b5a6" * 5},
    )
    assert registered.status_code == 201, registered.text
    return {"serial": serial, "token": token}


def order_body(product: str) -> dict[str, Any]:
    """Bob's order of two tickets, sent with an ``Idempotency-Key``."""
    return {
        "user": {"email": "bob@example.com"},
        "items": [{"product_id": product, "quantity": 2}],
        "order_number": "TS-UPGRADE-1",
    }


PEOPLE = ("ada", "bob", "cy")
EVENT = {
    "name": "Harbour Nights",
    "location": "Pier 4",
    "address": "1 Quay Street",
    "description": "Made by the previous release",
    "start_date": START,
    "end_date": START + 4 * 3600,
    "reference_id": "harbour-nights",
}


def person(name: str) -> dict[str, str]:
    return {
        "email": f"{name}@example.com",
        "firstName": name.title(),
        "lastName": "Upgrade",
        "referenceId": f"ref-{name}",
    }


def hold_a_wallet(send: Api, user: dict[str, Any]) -> None:
    """The user links a wallet of their own by signing the challenge with its key."""
    keypair = Keypair.create_from_uri("//TesseraUpgrade", crypto_type=KeypairType.SR25519)
    asked = {"id": user["id"], "address": keypair.ss58_address}
    message = send("POST", "/v1/users/wallets/challenge", 201, asked)["message"]
    signed = {
        "email": user["email"],
        "address": keypair.ss58_address,
        "signature": "0x" + keypair.sign(message.encode()).hex(),
    }
    send("POST", "/v1/users/wallets", 201, signed)


def pass_json(pkpass: bytes) -> dict[str, Any]:
    """A ``.pkpass``'s ``pass.json``, with a digest of its logo (the project's, scaled): the
    signature differs at every signing, what it signs does not."""
    with zipfile.ZipFile(io.BytesIO(pkpass)) as archive:
        content: dict[str, Any] = json.loads(archive.read("pass.json"))
        content["logo.png"] = hashlib.sha256(archive.read("logo.png")).hexdigest()
        return content


# Everything read back.


def snapshot(base: str, made: dict[str, Any]) -> Answers:
    """Every read of what ``build`` made, by request."""
    answers: Answers = {}
    with httpx.Client(base_url=base, headers=made["headers"], timeout=10) as api:

        def read(method: str, path: str, body: object = None, **params: Any) -> Any:
            response = api.request(method, path, json=body, params=params or None)
            assert response.status_code == 200, f"{method} {path}: {response.text}"
            asked = body or params
            answered: Any = response.json()
            answers[f"{method} {path}" + (f" {json.dumps(asked)}" if asked else "")] = answered
            return answered

        read("GET", "/v1/users/count")
        for user in read("POST", "/v1/users/fetch", {"limit": 100})["users"]:
            read("POST", "/v1/users/profile", {"id": user["id"]})
            read("POST", "/v1/users/activation", {"id": user["id"]})
            read("POST", "/v1/users/items", {"id": user["id"], "limit": 100})
            read("POST", "/v1/users/reputation/history", {"id": user["id"]})

        event = made["event"]
        read("GET", "/v1/events")
        read("GET", f"/v1/events/{event}")
        read("GET", "/v1/events/harbour-nights")
        read("GET", f"/v1/events/{event}/attendees")

        read("GET", "/v1/products")
        for product in made["products"]:
            read("GET", f"/v1/products/{product}")
            read("GET", f"/v1/products/{product}/sales")
            for item in read("GET", f"/v1/products/{product}/items", limit=100)["items"]:
                read("GET", f"/v1/products/{product}/items/{item['id']}")
                read("GET", f"/v1/products/{product}/items/{item['item_id']}/transfers")
                read("GET", f"/v1/products/{product}/items/{item['id']}/ticket")
            for link in read("GET", f"/v1/products/{product}/claim-links")["claim_links"]:
                read("GET", f"/v1/products/{product}/claim-links/{link['id']}")
        read("GET", f"/v1/claims/{made['claim_token']}")

        for order in read("GET", "/v1/orders", limit=100)["orders"]:
            read("GET", f"/v1/orders/{order['id']}")

        read("GET", "/v1/webhooks")
        read("GET", f"/v1/webhooks/{made['webhook']}")
        read("GET", f"/v1/webhooks/{made['webhook']}/deliveries")

        read("GET", "/v1/checkins", event_id=event, limit=100)
        synced = read("GET", "/v1/checkins/sync", event_id=event)
        del synced["cursor"]  # the time the sync was taken
        read("GET", "/v1/checkins/events")
        read("GET", "/v1/projects/wallets")
        read("GET", "/v1/changes", limit=100)

        device = f"/passkit/v1/devices/{DEVICE}/registrations/{PASS_TYPE_ID}"
        read("GET", device)
        latest = api.get(
            f"/passkit/v1/passes/{PASS_TYPE_ID}/{made['pass']['serial']}",
            headers={"authorization": f"ApplePass {made['pass']['token']}"},
        )
        assert latest.status_code == 200, latest.text
        answers["the pass, as a device fetches it"] = pass_json(latest.content)
    return answers


def differences(before: Answers, after: Answers) -> list[str]:
    """Where ``after`` does not answer what ``before`` did: a request, a field or an element
    gone or changed. A field ``after`` adds is no difference."""
    found = [f"{request}: not answered" for request in before.keys() - after.keys()]
    for request in before.keys() & after.keys():
        if request.startswith("GET /v1/changes"):
            # On PostgreSQL a change shows once every transaction of the cluster that began
            # before it has ended (tessera.changes.service): the suite's other workers may hold
            # the newest back from one read, never the ones a read showed.
            events = after[request]["events"][: len(before[request]["events"])]
            found += _differences(before[request]["events"], events, request)
        else:
            found += _differences(before[request], after[request], request)
    return found


def _differences(before: Any, after: Any, where: str) -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            difference
            for key, value in before.items()
            for difference in (
                _differences(value, after[key], f"{where}.{key}")
                if key in after
                else [f"{where}.{key}: gone"]
            )
        ]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            difference
            for index, (was, now) in enumerate(zip(before, after, strict=True))
            for difference in _differences(was, now, f"{where}[{index}]")
        ]
    return [] if before == after else [f"{where}: {before!r} became {after!r}"]
