"""Schemathesis hooks: the rules that JSON Schema cannot state.

Each rule is written in the operation's OpenAPI description and checked by the server with a
400; these filters keep the fuzzer's generated requests to them, so that a refusal of any
other schema-valid request fails the run. Nothing else is filtered. An SS58 address's checksum
cannot be generated at random either: ``map_case`` gives a wallet request a real address (of
a key made from the generated text), and each case its own ``Idempotency-Key``, and leaves the
rest of the case as generated.
"""

import hashlib
import re
import time
import uuid
from typing import Any

import schemathesis
from scalecodec.utils.ss58 import ss58_encode

from tessera.chain.keys import public_key_of
from tessera.changes.feed import Place

SS58_SHAPE = re.compile(r"[1-9A-HJ-NP-Za-km-z]{46,48}")
ADDRESSED = {("POST", "/v1/users/wallets/challenge"), ("POST", "/v1/users/wallets")}
HOOKED = {("POST", "/v1/webhooks"), ("PATCH", "/v1/webhooks/{id}")}
# Where the fuzzed webhooks point: a closed port on loopback (the run allows private
# addresses), so that no delivery leaves the machine. Whether a URL may be registered is
# tested in tests/webhooks.
HOOK_URL = "http://127.0.0.1:9/fuzz"

MAX_ITEMS_PER_ORDER = 550
MAX_RECIPIENTS = 550


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _dates_in_order(body: Any) -> bool:
    """Events: ``end_date`` not before ``start_date``, when the body has both."""
    if not isinstance(body, dict):
        return True
    start, end = body.get("start_date"), body.get("end_date")
    return not (_number(start) and _number(end) and end < start)


def _order_within_bound(body: Any) -> bool:
    """Orders: at most 550 items in all (the sum of the quantities)."""
    lines = body.get("items") if isinstance(body, dict) else None
    if not isinstance(lines, list):
        return True
    quantities = [line.get("quantity") for line in lines if isinstance(line, dict)]
    return sum(q for q in quantities if _number(q)) <= MAX_ITEMS_PER_ORDER


def _recipients_within_bound(body: Any) -> bool:
    """Items: at most 550 recipients in all (``users`` + ``emails``)."""
    if not isinstance(body, dict):
        return True
    lists = [body.get(name) for name in ("users", "emails")]
    return sum(len(value) for value in lists if isinstance(value, list)) <= MAX_RECIPIENTS


def _unique_in_batch(body: Any) -> bool:
    """users/create: each email (lowercased) and each referenceId once in the batch."""
    if not isinstance(body, list):
        return True
    users = [u for u in body if isinstance(u, dict)]
    for field, key in (("email", str.lower), ("referenceId", str)):
        values = [key(u[field]) for u in users if isinstance(u.get(field), str)]
        if len(values) != len(set(values)):
            return False
    return True


def _same_product(case: Any) -> bool:
    """Items: ``product_id`` in the body, when sent, is the product of the path."""
    body, path = case.body, case.path_parameters or {}
    sent = body.get("product_id") if isinstance(body, dict) else None
    return sent is None or sent == path.get("id")


def _nft_switch_complete(body: Any) -> bool:
    """Product updates: ``mint_nft: true`` with ``metadata_uri`` and ``chain`` (a product without
    them stored would refuse it with a 400: a rule of the stored product, in ``mint_nft``'s
    description)."""
    if not isinstance(body, dict) or body.get("mint_nft") is not True:
        return True
    return body.get("metadata_uri") is not None and body.get("chain") is not None


def _expires_in_the_future(body: Any) -> bool:
    """Claim links: ``expires_at`` in the future, when sent (a minute's margin for the run)."""
    expires = body.get("expires_at") if isinstance(body, dict) else None
    return not _number(expires) or expires > time.time() + 60


RULES = {
    ("POST", "/v1/events/create"): _dates_in_order,
    ("PUT", "/v1/events/update"): _dates_in_order,
    ("POST", "/v1/orders"): _order_within_bound,
    ("POST", "/v1/products/{id}/items"): _recipients_within_bound,
    ("POST", "/v1/products/{id}/claim-links"): _expires_in_the_future,
    ("PATCH", "/v1/products/{id}"): _nft_switch_complete,
    ("POST", "/v1/users/create"): _unique_in_batch,
}
CASE_RULES = {("POST", "/v1/products/{id}/items"): _same_product}


@schemathesis.hook
def filter_case(ctx: schemathesis.HookContext, case: schemathesis.Case) -> bool:
    """Applied in every phase (``filter_body`` would miss the coverage phase's cases)."""
    operation = (case.operation.method.upper(), case.operation.path)
    body_rule, case_rule = RULES.get(operation), CASE_RULES.get(operation)
    return (body_rule is None or body_rule(case.body)) and (case_rule is None or case_rule(case))


@schemathesis.hook
def map_case(ctx: schemathesis.HookContext, case: schemathesis.Case) -> schemathesis.Case:
    operation = (case.operation.method.upper(), case.operation.path)
    body = case.body
    address = body.get("address") if isinstance(body, dict) else None
    if operation in ADDRESSED and isinstance(address, str) and SS58_SHAPE.fullmatch(address):
        try:
            public_key_of(address)
        except ValueError:  # the shape of an address, not its checksum
            public_key = hashlib.sha256(address.encode()).digest()
            body["address"] = ss58_encode(public_key, ss58_format=42)
    url = body.get("url") if isinstance(body, dict) else None
    if operation in HOOKED and isinstance(url, str) and len(url) <= 2048 and "\x00" not in url:
        body["url"] = HOOK_URL  # a URL the schema allows (a refused one stays, to be refused)
    # A cursor cannot be generated at random: one of the shape Tessera gives, from the text.
    query = case.query or {}
    if operation == ("GET", "/v1/changes") and isinstance(query.get("after"), str):
        query["after"] = Place(len(query["after"]), 0).cursor()
    # A generated Idempotency-Key repeats across cases ("0", "a", ...), and a key sent again with
    # another request is 422 by design: each case gets a key of its own (the header stays).
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "idempotency-key":
            headers[name] = uuid.uuid4().hex
    return case
