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
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from tessera.errors import InvalidInput

MAX_URL = 2048


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
