"""Where a webhook may be sent: https to public addresses only, checked when the endpoint is
registered and again at every delivery, which then connects to the very address it checked (a
host that resolves elsewhere the second time, DNS rebinding, gains nothing).

Refused: loopback, private, link-local (the cloud metadata service at 169.254.169.254),
shared, reserved, multicast and unspecified addresses, IPv4 or IPv6, and IPv4 inside IPv6.
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


def _allowed(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
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
