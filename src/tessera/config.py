"""One typed settings object, read once from the environment (prefix ``TESSERA_``).

Secrets are ``SecretStr`` so they never show up in a repr or a log line. Outside ``env=dev`` the
placeholder secrets that make a fresh clone run are refused at start-up.
"""

import base64
import binascii
from dataclasses import dataclass
from decimal import Decimal
from email.utils import parseaddr
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import unquote, urlsplit

from fastapi import Depends, Request
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Placeholders let `make serve` work on a fresh clone; `env=production` refuses them.
DEV_SECRET_KEYS = "dev:ZGV2LW9ubHkta2V5LWRvLW5vdC11c2UtaW4tcHJvZCE="  # noqa: S105 - refused in production
DEV_HASH_KEY = "dev-only-hash-key-do-not-use-in-production"

Chain = Literal["AssetHub", "WestendAssetHub"]
CHAINS: tuple[Chain, ...] = ("AssetHub", "WestendAssetHub")


class Settings(BaseSettings):
    # A refused value is not echoed in the error: it may be a secret (a key, a password).
    model_config = SettingsConfigDict(
        env_prefix="TESSERA_", extra="ignore", hide_input_in_errors=True
    )

    env: Literal["dev", "test", "production"] = "dev"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    log_level: str = "info"
    # One line per request on the "tessera.access" logger (see tessera.middleware); every log
    # line is a JSON object when stderr is not a terminal (see tessera.logs).
    access_log: bool = True
    # FastAPI's own OpenTelemetry spans, metrics and logs, for the providers the process sets
    # up. Off, a request does not look the global providers up.
    opentelemetry: bool = False
    # GET /metrics wants "Authorization: Bearer <this>"; unset, it answers loopback clients only.
    metrics_token: SecretStr | None = Field(default=None, min_length=16)
    # Per process, against slow or greedy clients (see tessera.server).
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # A request's body, whole, from the request's start (see tessera.middleware).
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    keep_alive_seconds: int = Field(default=5, ge=1, le=300)
    max_connections: int = Field(default=1000, ge=1)
    # Proxies whose X-Forwarded-For / -Proto are believed (comma-separated addresses or "*").
    forwarded_allow_ips: str | None = None

    database_url: str = "sqlite+aiosqlite:///./tessera.db"
    # PostgreSQL connections per process. A request waits for a pooled connection; overflow
    # connections are opened for one use and closed, which costs more than the query. A
    # process opens at most pool + pool / 4 + 2 x overflow (the ORM sessions' quarter): 30 by
    # default, so `serve --workers 2` and a `tessera worker` fit a default PostgreSQL's 100.
    db_pool_size: int = Field(default=24, ge=1)
    db_max_overflow: int = Field(default=0, ge=0)
    # How long a request waits for a connection (the pool's queue, opening one; on SQLite,
    # another process's write lock) before it answers 503 with Retry-After.
    db_pool_timeout_seconds: float = Field(default=10.0, gt=0, le=300)

    # Key-encryption keys for secrets at rest: "kid:base64(32 bytes)[,kid:base64...]".
    # The first is used to encrypt; all of them decrypt, so a new key can be put first and the
    # old one kept until every secret has been re-encrypted.
    secret_keys: SecretStr = SecretStr(DEV_SECRET_KEYS)
    # HMAC key for API keys and client secrets (only hashes of those are stored).
    hash_key: SecretStr = SecretStr(DEV_HASH_KEY)

    max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)

    # Tessera's own token issuer.
    jwt_issuer: str = "tessera"
    jwt_audience: str = "tessera-api"
    token_ttl_seconds: int = Field(default=3600, ge=60, le=86400)
    signing_key_rotation_seconds: int = Field(default=30 * 86400, ge=3600)

    # One external OIDC issuer (e.g. Google); a token's subject is bound with `tessera identity`.
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_jwks_url: str | None = None
    oidc_jwks_cache_seconds: int = Field(default=300, ge=0)
    # A credential that checked out is trusted this long without a query (0 turns it off): a
    # key revoked or expired in the database is refused by every process within this time.
    credential_cache_seconds: float = Field(default=1.0, ge=0, le=2)

    ss58_prefix: int = Field(default=42, ge=0, le=16383)

    # Where people reach this server: the base of a claim link's `url` (unset: the base URL the
    # creating request came to, which is right unless a proxy rewrites the host).
    public_url: str | None = Field(default=None, pattern=r"^https?://[^/?#\s]+(/[^?#\s]*)?$")
    # Requests per second per credential, for reads and for writes (a token bucket holding one
    # second's worth); 0 turns a limit off. Shared by every process on PostgreSQL.
    rate_limit_read: float = Field(default=0, ge=0)
    rate_limit_write: float = Field(default=0, ge=0)
    # How long a write's answer is kept for a retry with the same Idempotency-Key.
    idempotency_ttl_seconds: int = Field(default=86400, ge=60)
    # Claims per minute, per client address and per claim link, in each process.
    claim_rate_per_address: int = Field(default=30, ge=1)
    claim_rate_per_link: int = Field(default=120, ge=1)
    # The change feed (GET /v1/changes, webhooks) keeps changes and delivery attempts this long:
    # more than the 3 days that a failing webhook endpoint is retried for.
    changes_retention_days: int = Field(default=30, ge=4)
    # Webhook URLs must be https and reach public addresses only; true (development, tests)
    # allows http and loopback, private and link-local addresses.
    webhooks_allow_private: bool = False
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=60)

    # Chains are "configured" when they have an RPC URL (ws:// or wss://).
    chain_assethub_rpc_url: str | None = None
    chain_assethub_ss58_prefix: int = Field(default=0, ge=0, le=16383)
    chain_assethub_symbol: str = "DOT"
    chain_assethub_decimals: int = Field(default=10, ge=0, le=30)
    chain_westendassethub_rpc_url: str | None = None
    chain_westendassethub_ss58_prefix: int = Field(default=42, ge=0, le=16383)
    chain_westendassethub_symbol: str = "WND"
    chain_westendassethub_decimals: int = Field(default=12, ge=0, le=30)
    chain_timeout_seconds: float = Field(default=30.0, gt=0)
    # Chain reads inside a request (balance checks) get less: on SQLite a write request holds
    # the single write slot while it waits.
    chain_request_timeout_seconds: float = Field(default=10.0, gt=0)
    # NFT work at the chain's pace (README, "NFTs on chain"): the share of a block's normal
    # class that one batch leaves to other traffic; the blocks a signed extrinsic may take to
    # land (its mortal era, a power of two); how often a worker looks at the chain while its
    # extrinsics are in flight; how long the next extrinsic of a signer may go unseen in a block
    # before its bytes are submitted again.
    chain_block_headroom: float = Field(default=0.1, ge=0, lt=1)
    chain_era_blocks: int = Field(default=256, ge=4, le=65536)
    chain_poll_seconds: float = Field(default=0.5, gt=0)
    chain_resubmit_seconds: float = Field(default=12.0, gt=0)

    # The job worker. `tessera serve` runs one in-process unless this is off (separate workers).
    worker_in_process: bool = True
    worker_poll_seconds: float = Field(default=1.0, gt=0)
    # Every worker moves its row in worker_heartbeats this often; GET /v1/health/ready wants a
    # beat within the last three intervals.
    worker_heartbeat_seconds: float = Field(default=5.0, gt=0, le=3600)
    job_max_attempts: int = Field(default=8, ge=1)
    # Claims a worker runs at a time (an NFT batch waiting for its block holds one).
    worker_slots: int = Field(default=4, ge=1, le=64)
    # A batch of jobs that is not full (an NFT collection's mints) is claimed once no job has
    # joined it for the first figure, or once its oldest has waited the second.
    job_batch_gather_seconds: float = Field(default=1.0, ge=0)
    job_batch_max_wait_seconds: float = Field(default=6.0, ge=0)
    # A running job's lease, renewed every quarter of it by its worker: a dead worker's job runs
    # again within this long.
    job_lease_seconds: int = Field(default=20, ge=4)
    # Products with NFT activity in the last day are reconciled with the chain this often
    # (0: never); an item or collection waiting longer than the stuck figure is reported stuck.
    reconcile_interval_seconds: int = Field(default=3600, ge=0)
    reconcile_stuck_seconds: int = Field(default=900, ge=1)
    # A check-in at the door can be annulled this long after its scan (POST /v1/checkins/annul).
    checkin_annul_seconds: int = Field(default=900, ge=0)

    # Email (README, "Email"): smtp://host:port, smtp+starttls://user:password@host:587 or
    # smtps://user:password@host:465. Unset, no email is written or sent. The URL is a secret
    # (its password): read it through ``smtp``. Mail goes out from TESSERA_MAIL_FROM
    # ("Name <address>" or an address), which the SMTP URL needs.
    smtp_url: SecretStr | None = None
    mail_from: str | None = Field(default=None, max_length=320)

    # `tessera devchain`: Chopsticks from the npm registry on a raw Asset Hub chain spec. Unset,
    # the spec Tessera carries (tessera.chain.devchain), and a checkout's .cache/chopsticks or,
    # installed, ~/.cache/tessera/chopsticks.
    devchain_spec: Path | None = None
    devchain_cache: Path | None = None
    devchain_port: int = Field(default=9944, ge=1, le=65535)

    @field_validator("secret_keys")
    @classmethod
    def _parse_secret_keys(cls, value: SecretStr) -> SecretStr:
        parse_key_ring(value.get_secret_value())
        return value

    @field_validator("smtp_url")
    @classmethod
    def _parse_smtp_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_smtp_url(value.get_secret_value())
        return value

    @field_validator("mail_from")
    @classmethod
    def _check_mail_from(cls, value: str | None) -> str | None:
        if value is not None and "@" not in parseaddr(value)[1]:
            raise ValueError("TESSERA_MAIL_FROM: an address, or a name and <address>")
        return value

    @model_validator(mode="after")
    def _mail_needs_a_sender(self) -> "Settings":
        if self.smtp_url is not None and self.mail_from is None:
            raise ValueError("TESSERA_SMTP_URL needs TESSERA_MAIL_FROM")
        return self

    @model_validator(mode="after")
    def _refuse_placeholders(self) -> "Settings":
        if self.env == "production" and self.uses_dev_secrets:
            raise ValueError("TESSERA_SECRET_KEYS and TESSERA_HASH_KEY must be set in production")
        if bool(self.oidc_issuer) != bool(self.oidc_jwks_url) or (
            self.oidc_issuer and not self.oidc_audience
        ):
            raise ValueError(
                "TESSERA_OIDC_ISSUER, TESSERA_OIDC_AUDIENCE and TESSERA_OIDC_JWKS_URL go together"
            )
        return self

    @property
    def uses_dev_secrets(self) -> bool:
        return (
            self.secret_keys.get_secret_value() == DEV_SECRET_KEYS
            or self.hash_key.get_secret_value() == DEV_HASH_KEY
        )

    @property
    def hash_key_bytes(self) -> bytes:
        return self.hash_key.get_secret_value().encode()

    @property
    def key_ring(self) -> dict[str, bytes]:
        return parse_key_ring(self.secret_keys.get_secret_value())

    def chain(self, name: str) -> "ChainConfig | None":
        """The settings of a chain Tessera knows (configured or not); None for any other name."""
        known = next((chain for chain in CHAINS if chain == name), None)
        if known is None:
            return None
        prefix = f"chain_{known.lower()}_"
        return ChainConfig(
            name=known,
            rpc_url=getattr(self, prefix + "rpc_url"),
            ss58_prefix=getattr(self, prefix + "ss58_prefix"),
            symbol=getattr(self, prefix + "symbol"),
            decimals=getattr(self, prefix + "decimals"),
        )

    def configured_chains(self) -> list["ChainConfig"]:
        return [c for c in map(self.chain, CHAINS) if c is not None and c.rpc_url]

    @property
    def smtp(self) -> "SmtpServer | None":
        """The SMTP server of ``TESSERA_SMTP_URL`` (None: no email)."""
        if self.smtp_url is None:
            return None
        return parse_smtp_url(self.smtp_url.get_secret_value())


@dataclass(frozen=True, slots=True)
class ChainConfig:
    name: Chain
    rpc_url: str | None
    ss58_prefix: int
    symbol: str
    decimals: int

    @property
    def setting(self) -> str:
        return f"TESSERA_CHAIN_{self.name.upper()}_RPC_URL"

    def amount(self, planck: int) -> str:
        """An amount in the chain's units, e.g. "10.0053 DOT"."""
        whole = Decimal(planck) / (Decimal(10) ** self.decimals)
        return f"{whole.normalize():f} {self.symbol}"


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


def parse_key_ring(text: str) -> dict[str, bytes]:
    """Parse "kid:base64,..." into an ordered {kid: key}; the first entry is the active key."""
    ring: dict[str, bytes] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kid, sep, encoded = part.partition(":")
        if not sep or not kid:
            raise ValueError("secret_keys entries look like kid:base64key")
        try:
            key = base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"secret key {kid!r} is not valid base64") from exc
        if len(key) != 32:
            raise ValueError(f"secret key {kid!r} must be 32 bytes (AES-256)")
        ring[kid] = key
    if not ring:
        raise ValueError("secret_keys needs at least one key")
    return ring


@lru_cache
def get_settings() -> Settings:
    return Settings()


async def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(settings_of)]
