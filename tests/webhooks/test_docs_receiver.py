"""The receiver example of docs/webhooks.md, run as written: it accepts what Tessera sends and
refuses a forged signature. (The example is read from the page, so the two cannot drift apart.)"""

import re
from typing import Any

import httpx

from tessera.webhooks.dispatcher import Dispatcher
from tests.factories import create_user
from tests.serving import ROOT
from tests.webhooks.conftest import changes, create_webhook, deliver_until

EXAMPLE = re.compile(r"A receiver that verifies the signature.*?```python\n(.*?)```", re.S)


def docs_receiver(secret: str) -> dict[str, Any]:
    code = EXAMPLE.search((ROOT / "docs" / "webhooks.md").read_text())
    assert code is not None, "the receiver example of docs/webhooks.md is gone"
    source = code.group(1)
    assert 'Webhook("whsec_...")' in source
    namespace: dict[str, Any] = {}
    exec(compile(source.replace("whsec_...", secret), "docs/webhooks.md", "exec"), namespace)  # noqa: S102
    return namespace


async def test_the_docs_receiver_accepts_tessera_and_refuses_a_forgery(
    client, tenant, dispatcher: Dispatcher
) -> None:
    hook = await create_webhook(client, tenant, "http://127.0.0.1:9/tessera")
    receiver = docs_receiver(hook["secret"])
    transport = httpx.ASGITransport(app=receiver["app"])
    # The dispatcher's requests go to the example app in this process, not to the network.
    dispatcher._client = httpx.AsyncClient(transport=transport, follow_redirects=False)
    user = await create_user(client, tenant)
    [event] = await changes(client, tenant, 1)
    await deliver_until(dispatcher, lambda: bool(receiver["seen"]))
    assert receiver["seen"] == {event["id"]}
    listed = await client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=tenant.r)
    [delivery] = listed.json()["deliveries"]
    assert (delivery["status"], delivery["response_status"]) == ("succeeded", 200)
    assert event["data"]["email"] == user["email"]

    async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as http:
        forged = await http.post(
            "/tessera",
            content=b'{"type": "user.created"}',
            headers={
                "webhook-id": "msg_forged",
                "webhook-timestamp": "1",
                "webhook-signature": "v1,AAAA",
            },
        )
    assert forged.status_code == 400
    assert receiver["seen"] == {event["id"]}
