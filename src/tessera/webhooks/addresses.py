"""Where a webhook may be sent: https to public addresses only, checked when the endpoint is
registered and again at every delivery, which then connects to the very address it checked (a
host that resolves elsewhere the second time, DNS rebinding, gains nothing).

Refused: loopback, private, link-local (the cloud metadata service at 169.254.169.254),
shared, reserved, multicast and unspecified addresses, IPv4 or IPv6, and IPv4 inside IPv6 by
any translation (mapped, compatible, NAT64, 6to4, Teredo), judged by the IPv4 address.
``TESSERA_WEBHOOKS_ALLOW_PRIVATE=true`` (development, tests) allows http and every address.
"""

import asyncio
import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from tessera.errors import InvalidInput

MAX_URL = 2048

# The form of a webhook URL, as a pattern the OpenAPI states (``url_pattern``) and the server
# holds to: the scheme, a host (a name, an IPv4 address, or an IPv6 address in brackets; no
# user name or password), an optional port up to 65535, then a path or query without spaces,
# control characters or a fragment. An IPv6 address of an unusual spelling (a zone, an IPv4
# tail after more than four groups) is refused: a webhook is normally a name.
_H4 = "[0-9A-Fa-f]{1,4}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_V4 = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
_V6 = "|".join(
    [
        f"(?:{_H4}:){{7}}{_H4}",
        f"(?:{_H4}:){{1,7}}:",
        f"(?:{_H4}:){{1,6}}:{_H4}",
        f"(?:{_H4}:){{1,5}}(?::{_H4}){{1,2}}",
        f"(?:{_H4}:){{1,4}}(?::{_H4}){{1,3}}",
        f"(?:{_H4}:){{1,3}}(?::{_H4}){{1,4}}",
        f"(?:{_H4}:){{1,2}}(?::{_H4}){{1,5}}",
        f"{_H4}:(?::{_H4}){{1,6}}",
        f":(?:(?::{_H4}){{1,7}}|:)",
        f"::(?:[Ff]{{4}}(?::0{{1,4}})?:)?{_V4}",
        f"(?:{_H4}:){{1,4}}:{_V4}",
    ]
)
# Control characters and every space (of Python's str.isspace and of JSON Schema's \s alike):
# named one by one, as the two regular expression dialects differ on what \s is.
_UNSAFE = r"\u0000-\u0020\u007f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_HOST = rf"(?:[^{_UNSAFE}/?#@:\[\]\\]+|\[(?:{_V6})\])"
_PORT_NUMBER = "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
_PORT = f"(?::0*{_PORT_NUMBER})?"
_REST = rf"(?:[/?][^{_UNSAFE}#]*)?"


def url_pattern(*, allow_private: bool) -> str:
    """The pattern of a webhook URL: https, or http too while private addresses are allowed."""
    scheme = "https?" if allow_private else "https"
    return f"^{scheme}://{_HOST}{_PORT}{_REST}$"


_URLS = {allowed: re.compile(url_pattern(allow_private=allowed)) for allowed in (False, True)}


class UnsafeAddress(Exception):
    """The URL's host is, or resolves to, an address webhooks may not reach."""


@dataclass(frozen=True, slots=True)
class Target:
    """A URL with its host replaced by the checked address, and what the request then sends
    for the host: the ``Host`` header and, for https, the TLS server name."""

    url: str
    host: str  # the Host header
    server_name: str


def check_url(url: str, *, allow_private: bool) -> str:
    """``url`` if it has the form of a webhook URL (400 naming the problem otherwise)."""
    problem = _form_problem(url, allow_private=allow_private)
    if problem:
        raise InvalidInput(f"url: {problem}")
    return url


def _form_problem(url: str, *, allow_private: bool) -> str | None:
    if len(url) > MAX_URL:
        return f"at most {MAX_URL} characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return "not a URL"
    schemes = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in schemes:
        return "must be an https URL"
    if not parts.hostname:
        return "must name a host"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user name or password"
    if parts.fragment:
        return "must not have a fragment"
    if any(c.isspace() for c in url):
        return "must not contain spaces"
    if not _URLS[allow_private].fullmatch(url):
        return "not a URL of the form the OpenAPI states (see its pattern)"
    return None


# IPv6 prefixes that carry an IPv4 address in their low 32 bits (NAT64, RFC 6052), and a
# NAT64 prefix for local use (RFC 8215) that Python calls global.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")


def _ipv4_inside(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, by any of the translations that reach one
    (mapped, compatible, NAT64, 6to4, Teredo's client), or None."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64 or (ip.packed[:12] == bytes(12) and int(ip) > 1):  # ::a.b.c.d
        return ipaddress.IPv4Address(ip.packed[12:])
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def _allowed(address: str) -> bool:
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
        address.split("%", 1)[0]
    )
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64:
            return False
        inside = _ipv4_inside(ip)
        if inside is not None:
            ip = inside
    return ip.is_global and not ip.is_multicast


async def resolve(url: str, *, allow_private: bool) -> Target:
    """Where to send ``url``'s request: one of the addresses its host resolves to, every one of
    them public (``UnsafeAddress`` otherwise, or when it does not resolve)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UnsafeAddress(f"{host} does not resolve: {exc.strerror or exc}") from None
    addresses = [str(info[4][0]) for info in found]
    if not allow_private:
        refused = sorted({a for a in addresses if not _allowed(a)})
        if refused:
            raise UnsafeAddress(
                f"{host} resolves to an address webhooks may not reach: {refused[0]}"
            )
    address = addresses[0]
    literal = f"[{address}]" if ":" in address else address
    netloc = literal if parts.port is None else f"{literal}:{parts.port}"
    return Target(
        url=urlunsplit(parts._replace(netloc=netloc)),
        host=parts.netloc,
        server_name=host,
    )


async def check_reachable(url: str, *, allow_private: bool) -> None:
    """At registration: 400 unless the URL's host resolves to public addresses only (with
    private addresses allowed there is nothing to refuse, and the host need not resolve yet)."""
    if allow_private:
        return
    try:
        await resolve(url, allow_private=False)
    except UnsafeAddress as exc:
        raise InvalidInput(f"url: {exc}") from None
