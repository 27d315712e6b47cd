"""Schemathesis hooks: the rules that JSON Schema cannot state.

Each rule is written in the operation's OpenAPI description and checked by the server with a
400; these filters keep the fuzzer's generated requests to them, so that a refusal of any
other schema-valid request fails the run. Nothing else is filtered: what a pattern or a
conditional can say (a webhook URL's form, an SS58 address's alphabet and length, a cursor,
``mint_nft`` with its ``metadata_uri`` and ``chain``) is in the schema itself. ``map_case``
changes three things and leaves the rest of a case as generated: an SS58 address of the right
form gets a valid checksum (a key made from the generated text: a checksum is no pattern), a
webhook URL of the right form points at a closed port on loopback (no delivery leaves the
machine), and each case gets an ``Idempotency-Key`` of its own.
"""

import hashlib
import re
import time
import uuid
from typing import Any

import schemathesis
from scalecodec.utils.ss58 import ss58_encode

from tessera.chain.keys import public_key_of
from tessera.webhooks.addresses import url_pattern

SS58_SHAPE = re.compile(r"[1-9A-HJ-NP-Za-km-z]{46,49}")  # as wallets.schemas.Address
ADDRESSED = {("POST", "/v1/users/wallets/challenge"), ("POST", "/v1/users/wallets")}
HOOKED = {("POST", "/v1/webhooks"), ("PATCH", "/v1/webhooks/{id}")}
# Where the fuzzed webhooks point: a closed port on loopback (the run allows private
# addresses), so that no delivery leaves the machine. Whether a URL may be registered is
# tested in tests/webhooks.
HOOK_URL = "https://127.0.0.1:9/fuzz"
WEBHOOK_URL = re.compile(url_pattern(allow_private=True))

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


def _expires_in_the_future(body: Any) -> bool:
    """Claim links: ``expires_at`` in the future, when sent (a minute's margin for the run)."""
    expires = body.get("expires_at") if isinstance(body, dict) else None
    return not _number(expires) or expires > time.time() + 60


def _plan_names_unique(body: Any) -> bool:
    """Seating plans: area names unique, row names in their area, numbers in their row; at
    most 50,000 seats."""
    areas = body.get("areas") if isinstance(body, dict) else None
    if not isinstance(areas, list):
        return True
    areas = [a for a in areas if isinstance(a, dict)]
    rows = [[r for r in a.get("rows") or [] if isinstance(r, dict)] for a in areas]
    numbers = [
        [s.get("number") for s in r.get("seats") or [] if isinstance(s, dict)]
        for a in rows
        for r in a
    ]
    named = [[a.get("name") for a in areas]] + [[r.get("name") for r in a] for a in rows] + numbers
    return all(len(n) == len(set(map(str, n))) for n in named) and sum(map(len, numbers)) <= 50_000


RULES = {
    ("POST", "/v1/events/create"): _dates_in_order,
    ("PUT", "/v1/events/update"): _dates_in_order,
    ("POST", "/v1/orders"): _order_within_bound,
    ("POST", "/v1/products/{id}/items"): _recipients_within_bound,
    ("POST", "/v1/products/{id}/claim-links"): _expires_in_the_future,
    ("POST", "/v1/users/create"): _unique_in_batch,
    ("PUT", "/v1/events/{event_id}/seating"): _plan_names_unique,
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
    if (
        operation in HOOKED
        and isinstance(url, str)
        and len(url) <= 2048
        and WEBHOOK_URL.fullmatch(url)
    ):
        body["url"] = HOOK_URL  # a URL the schema allows (a refused one stays, to be refused)
    # A generated Idempotency-Key repeats across cases ("0", "a", ...), and a key sent again with
    # another request is 422 by design: each case gets a key of its own (the header stays).
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "idempotency-key":
            headers[name] = uuid.uuid4().hex
    return case
