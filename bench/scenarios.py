"""What is measured: the limits, Tessera's scenarios, and the goal each is held to.

Paths and bodies may hold ``$ticket``, ``$drinks``, ``$shop`` (filled from the seed data here)
and the per-request tokens of bench/request.lua (``{user}``, ``{n}``, ...).
"""

from dataclasses import dataclass
from string import Template


@dataclass(frozen=True)
class Goal:
    """What a row of the table should reach: a ratio of at least ``value``, or a time of at
    most ``value`` ms (``key`` names the row's time: ``p50_ms``, ``p50_ms_1conn``)."""

    key: str
    value: float

    def met(self, row: dict) -> bool | None:
        measured = row.get(self.key)
        if measured is None:
            return None
        return measured >= self.value if self.key == "ratio" else measured <= self.value

    def __str__(self) -> str:
        return f">= {self.value:.2f}" if self.key == "ratio" else f"<= {self.value:g} ms"


# The ratio each kind of scenario should reach against its limit.
TARGETS = {"version": 0.5, "read": 0.4, "list": 0.25, "write": 0.2}
# The single-request extras' times, and reads on 2 workers against 1 (PostgreSQL).
FETCH_1000_MS, DEEP_FETCH_MS, CREATE_1500_MS, ISSUE_550_MS = 30, 50, 300, 100
TWO_WORKERS = Goal("ratio", 1.6)


@dataclass(frozen=True)
class Scenario:
    name: str
    method: str
    path: str
    body: str = ""
    kind: str = "limit"  # limit, version, read, list, write
    app: str = "tessera"  # or a limit of bench/limits.py: l1, l2, l2w
    key: str = "read"  # which API key it sends: read, write, or none

    @property
    def limit(self) -> str | None:
        """The limit this scenario is divided by."""
        return {"version": "L1", "read": "L2", "list": "L2", "write": "L2w"}.get(self.kind)

    @property
    def goal(self) -> Goal | None:
        target = TARGETS.get(self.kind)
        return None if target is None else Goal("ratio", target)

    def request(self, data: dict) -> tuple[str, str, str, str]:
        """(method, path, body, API key) for bench/request.lua."""
        key = {"read": data["read_key"], "write": data["write_key"], "none": ""}[self.key]
        fill = {name: data[name] for name in ("ticket", "drinks", "shop")}
        return (
            self.method,
            Template(self.path).substitute(fill),
            Template(self.body).substitute(fill),
            key,
        )


USER = '{"id":"{user}"}'

LIMITS = [
    Scenario("L1", "GET", "/v1/version", app="l1", key="none"),
    Scenario("L2", "POST", "/", USER, app="l2", key="none"),
    Scenario("L2w", "POST", "/", USER, app="l2w", key="none"),
]

TESSERA = [
    Scenario("GET /v1/version", "GET", "/v1/version", kind="version", key="none"),
    Scenario("POST users/profile {id}", "POST", "/v1/users/profile", USER, kind="read"),
    Scenario("GET events/{id}", "GET", "/v1/events/{event}", kind="read"),
    Scenario("GET products/{id}", "GET", "/v1/products/{product}", kind="read"),
    Scenario("GET orders/{id}", "GET", "/v1/orders/{order}", kind="read"),
    Scenario("GET users/count", "GET", "/v1/users/count", kind="read"),
    Scenario("GET products?limit=20", "GET", "/v1/products?limit=20", kind="list"),
    Scenario(
        "GET products/{id}/sales?limit=20",
        "GET",
        "/v1/products/$ticket/sales?limit=20",
        kind="list",
    ),
    # Writes: every request a new attendee (distinct event and user pair), item, redemption
    # (fresh nonce) or order (unique order number).
    Scenario(
        "register attendee",
        "POST",
        "/v1/events/attendees/register",
        '{"event_id":"{seq_event}","user_id":"{seq_user}"}',
        kind="write",
        key="write",
    ),
    Scenario(
        "issue 1 item",
        "POST",
        "/v1/products/$shop/items",
        '{"users":["{user}"]}',
        kind="write",
        key="write",
    ),
    Scenario(
        "redeem with nonce",
        "POST",
        "/v1/products/$drinks/items/redeem",
        '{"product_item_id":"{item}","nonce":"{n}"}',
        kind="write",
        key="write",
    ),
    Scenario(
        "create completed order",
        "POST",
        "/v1/orders",
        '{"user":{"id":"{user}"},"items":[{"product_id":"$shop","quantity":1}],'
        '"order_number":"B-{n}"}',
        kind="write",
        key="write",
    ),
]

# One connection: the service time of the largest page.
FETCH_1000 = Scenario(
    "users/fetch limit=1000 (1 conn)", "POST", "/v1/users/fetch", '{"limit":1000}', kind="extra"
)
# For the 2-worker comparison (PostgreSQL) and the soak.
PROFILE = TESSERA[1]
SOAK = [PROFILE, TESSERA[-1]]
# The request log's cost: these on the default server (log on) against one with it off.
LOGGED = [TESSERA[0], PROFILE]


def selected(only: str) -> tuple[list[Scenario], list[Scenario]]:
    """The Tessera scenarios whose name holds ``only`` (all when empty), and the limits they
    need plus any limit named."""
    wanted = [s for s in TESSERA if only.lower() in s.name.lower()]
    needed = {s.limit for s in wanted}
    limits = [s for s in LIMITS if s.name in needed or (only and only.lower() in s.name.lower())]
    return wanted, limits
