"""``TESSERA_SMTP_URL`` read: where email goes, with its password kept a ``SecretStr``."""

from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import SecretStr

SmtpSecurity = Literal["none", "starttls", "tls"]
SMTP_SCHEMES: dict[str, tuple[SmtpSecurity, int]] = {
    "smtp": ("none", 25),
    "smtp+starttls": ("starttls", 587),
    "smtps": ("tls", 465),
}


@dataclass(frozen=True, slots=True)
class SmtpServer:
    """Where email goes: ``TESSERA_SMTP_URL`` read. Its ``str`` names the server without the
    password, for logs; the password stays a ``SecretStr``."""

    host: str
    port: int
    security: SmtpSecurity
    username: str | None
    password: SecretStr | None

    def __str__(self) -> str:
        scheme = next(name for name, (kind, _) in SMTP_SCHEMES.items() if kind == self.security)
        user = f"{self.username}@" if self.username else ""
        return f"{scheme}://{user}{self.host}:{self.port}"


def parse_smtp_url(text: str) -> SmtpServer:
    """``smtp://host[:port]``, ``smtp+starttls://user:password@host[:port]`` or
    ``smtps://user:password@host[:port]`` (user and password percent-encoded). An error names
    the part that is wrong, never the URL: it holds a password."""
    try:
        url = urlsplit(text.strip())
        port = url.port
    except ValueError:
        raise ValueError("TESSERA_SMTP_URL: not a URL with a valid port") from None
    known = SMTP_SCHEMES.get(url.scheme.lower())
    if known is None:
        raise ValueError("TESSERA_SMTP_URL: the scheme is smtp, smtp+starttls or smtps")
    if not url.hostname:
        raise ValueError("TESSERA_SMTP_URL: a host is needed")
    if url.path not in ("", "/") or url.query or url.fragment:
        raise ValueError("TESSERA_SMTP_URL: no path, query or fragment")
    if (url.password is None) != (url.username is None):
        raise ValueError("TESSERA_SMTP_URL: a user and a password go together")
    security, default_port = known
    return SmtpServer(
        host=url.hostname,
        port=port or default_port,
        security=security,
        username=unquote(url.username) if url.username is not None else None,
        password=SecretStr(unquote(url.password)) if url.password is not None else None,
    )
