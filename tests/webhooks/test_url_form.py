"""A webhook URL's form: the OpenAPI's pattern and the server's rule are one.

The pattern is generated from (``hypothesis.strategies.from_regex``, as a schema-driven client or
fuzzer would) and every URL of it is taken; every refusal of the form is a URL off the pattern.
"""

import ipaddress
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tessera.errors import InvalidInput
from tessera.main import create_app
from tessera.webhooks.addresses import MAX_URL, check_url, url_pattern

ANY_LENGTH = settings(max_examples=400, suppress_health_check=list(HealthCheck), deadline=None)


@pytest.mark.parametrize("allow_private", [False, True])
def test_every_url_of_the_pattern_has_the_form(allow_private):
    @ANY_LENGTH
    @given(st.from_regex(url_pattern(allow_private=allow_private), fullmatch=True))
    def taken(url: str) -> None:
        if len(url) <= MAX_URL:
            assert check_url(url, allow_private=allow_private) == url

    taken()


def test_an_ipv6_host_of_the_pattern_is_an_address():
    host = re.compile(r"^https://\[(?P<host>[^\]]+)\]")

    seen = 0

    @ANY_LENGTH
    @given(st.from_regex(url_pattern(allow_private=False), fullmatch=True))
    def address(url: str) -> None:
        nonlocal seen
        if found := host.match(url):
            ipaddress.IPv6Address(found["host"])
            seen += 1

    address()
    assert seen > 0  # the generator reached the bracketed hosts


@pytest.mark.parametrize(
    "url",
    [
        "HTTPS://93.184.216.34/",  # the scheme as the pattern writes it
        "https://93.184.216.34:/",  # a port without digits
        "https://93.184.216.34:65536/",
        "https://93.184.216.34/#",  # even an empty fragment
        "https://93.184.216.34/a\u0085b",  # a space of Python's, not of JSON Schema's \s
        "https://93.184.216.34/a\u001fb",
        "https://93.184.216.34/a\x7fb",
        "https://[fe80::1%25eth0]/",  # a zone
        "https://[1:2:3:4:5:6:1.2.3.4]/",  # an IPv4 tail after six groups
        "https://a\\b/",
    ],
)
def test_a_url_off_the_pattern_is_refused(url):
    assert not re.fullmatch(url_pattern(allow_private=True), url)
    with pytest.raises(InvalidInput):
        check_url(url, allow_private=True)


@pytest.mark.parametrize(("allow_private", "schemes"), [(False, "https"), (True, "https?")])
def test_the_openapi_states_the_pattern_of_the_settings(settings, allow_private, schemes):
    app = create_app(settings.model_copy(update={"webhooks_allow_private": allow_private}))
    schemas = app.openapi()["components"]["schemas"]
    created = schemas["WebhookCreate"]["properties"]["url"]
    [updated] = [
        b for b in schemas["WebhookUpdate"]["properties"]["url"]["anyOf"] if "pattern" in b
    ]
    assert created["pattern"] == updated["pattern"] == url_pattern(allow_private=allow_private)
    assert created["pattern"].startswith(f"^{schemes}://")
