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

from fastapi import Depends, Request
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tessera.toolkit.smtp_url import SmtpServer, parse_smtp_url

# Placeholders let `make serve` work on a fresh clone; `env=production` refuses them.
DEV_SECRET_KEYS = "dev:ZGV2LW9ubHkta2V5LWRvLW5vdC11c2UtaW4tcHJvZCE="  # noqa: S105 - refused in production
DEV_HASH_KEY = "dev-only-hash-key-do-not-use-in-production"

Chain = Literal["AssetHub", "WestendAssetHub"]
CHAINS: tuple[Chain, ...] = ("AssetHub", "WestendAssetHub")


# What each phone wallet needs, all or none (the Apple key's password is optional).
APPLE_WALLET_SETTINGS = (
    "apple_pass_type_id",
    "apple_team_id",
    "apple_pass_certificate",
    "apple_pass_key",
    "apple_wwdr_certificate",
)
GOOGLE_WALLET_SETTINGS = ("google_wallet_issuer_id", "google_wallet_key_file")


class Settings(BaseSettings):
    """Every setting of the server, the worker and the CLI. Each field's docstring is its
    description in docs/settings.md (``make docs`` renders it: ``tessera.cli.settings_docs``)."""

    # A refused value is not echoed in the error: it may be a secret (a key, a password).
    model_config = SettingsConfigDict(
        env_prefix="TESSERA_",
        extra="ignore",
        hide_input_in_errors=True,
        use_attribute_docstrings=True,
    )

    env: Literal["dev", "test", "production"] = "dev"
    """`production` refuses the placeholder secrets (`SECRET_KEYS`, `HASH_KEY`) at start-up."""
    host: str = "127.0.0.1"
    """Where `tessera serve` listens."""
    port: int = Field(default=8000, ge=1, le=65535)
    """Where `tessera serve` listens."""
    log_level: str = "info"
    """The log level. Every log line on stderr is a JSON object (`time`, `level`, `logger`,
    `message`, and fields), or one line of text when stderr is a terminal."""
    access_log: bool = True
    """The request log: one line per request on `tessera.access` whatever the level
    (`request_id`, as the client sent it in `X-Request-Id` or as Tessera made it, `method`,
    `route` template, `status`, `duration_ms`, `project_id` when a credential was accepted;
    never paths, queries, headers or bodies). Lines are formatted and written by a thread of
    their own, in batches; a writer that falls 10,000 lines behind drops lines and counts them
    (`tessera_log_records_dropped_total`). Its cost is a row of `make bench`; `false` turns it
    off."""
    opentelemetry: bool = False
    """FastAPI's native OpenTelemetry (request spans, metrics and logs) for the providers the
    process configures (e.g. `opentelemetry-instrument`); off, requests skip the provider
    lookups."""
    metrics_token: SecretStr | None = Field(default=None, min_length=16)
    """`GET /metrics` wants `Authorization: Bearer <token>`; unset, it answers loopback clients
    only. Behind a proxy on the same host, set it (or `FORWARDED_ALLOW_IPS`)."""
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    """Per process, against slow clients (tessera.web.server): a request's line and headers must
    arrive within this, else 408 and the connection is closed (also for a connection that
    sends nothing)."""
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    """A request's body, whole, must arrive within this of the request's start, else 408
    `{"errors": ["body: not received within 30 s"]}` and the connection is closed."""
    keep_alive_seconds: int = Field(default=5, ge=1, le=300)
    """An idle keep-alive connection is closed after this."""
    max_connections: int = Field(default=1000, ge=1)
    """Per process: past this, a new connection gets 503 and is closed before anything is
    read."""
    forwarded_allow_ips: str | None = None
    """Proxies (comma-separated addresses, or `*`) whose `X-Forwarded-For` and
    `X-Forwarded-Proto` are believed; unset, none are and the client is the connection's
    peer."""

    database_url: str = "sqlite+aiosqlite:///./tessera.db"
    """SQLite, or `postgresql+asyncpg://user:pass@host/db`. A relative path is read from the
    current directory."""
    db_pool_size: int = Field(default=30, ge=1)
    """PostgreSQL connections per process, its only pool: requests, jobs and chores share it
    (opened as needed, kept; the chain signers' locks hold at most half). Past the size a
    request waits for one given back. A process opens at most `pool + overflow`, 30 by default,
    so `tessera serve --workers 2` and a `tessera worker` fit a default PostgreSQL
    (`max_connections` 100, 3 of them kept for superusers) with room for `psql` and the CLI.
    Size it so that every process together stays under the server's `max_connections`. The
    connections get no ping before use: one broken by a server restart fails its request with
    503, and every open connection is replaced before its next use."""
    db_max_overflow: int = Field(default=0, ge=0)
    """PostgreSQL connections opened past the pool for a burst, and closed as they come back
    (a connection opened for one use costs more than the query)."""
    db_pool_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    """How long a request waits for a database connection (the pool's queue, opening one; on
    SQLite, another process's write lock) before it answers 503 with `Retry-After`. A
    connection the server refuses (every slot taken, a restart) answers 503 at once."""

    database_direct_url: str | None = None
    """PostgreSQL itself, when `DATABASE_URL` is a pooler in transaction mode
    (`DB_TRANSACTION_POOLER`): the commands that need a session of their own connect here
    (`tessera db upgrade|status`, `tessera backup`, whose `pg_dump` and `pg_restore` set session
    settings a pooler would pass on to other clients). Unset: `DATABASE_URL`."""
    db_transaction_pooler: bool = False
    """`true` when `DATABASE_URL` is a pooler in transaction mode (PgBouncer's
    `pool_mode = transaction`, docs/deploy.md), whose server connection changes from one
    transaction to the next: each statement is then prepared anew (unnamed) instead of kept
    on the connection. Cross-process locks are held by transactions in either case."""

    secret_keys: SecretStr = SecretStr(DEV_SECRET_KEYS)
    """`kid:base64(32 bytes)[,kid:...]`: AES-256-GCM keys for secrets at rest (wallet,
    signing-key and webhook secrets); the first encrypts, all decrypt, so a new key can be put
    first and the old one kept until `tessera secrets rotate` has re-sealed everything."""
    hash_key: SecretStr = SecretStr(DEV_HASH_KEY)
    """HMAC key for API keys, client secrets, claim-link tokens and tickets (only hashes are
    stored)."""

    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    """Larger bodies get 413 (the default is 8 MiB: a seating plan of 50,000 seats fits)."""

    jwt_issuer: str = "tessera"
    """The `iss` claim of Tessera's own tokens."""
    jwt_audience: str = "tessera-api"
    """The `aud` claim of Tessera's own tokens."""
    token_ttl_seconds: int = Field(default=3600, ge=60, le=86400)
    """The life of a token from `POST /v1/auth/token`."""
    signing_key_rotation_seconds: int = Field(default=30 * 86400, ge=3600)
    """Token signing keys rotate on this period (30 days)."""

    oidc_issuer: str | None = None
    """One external OIDC issuer (e.g. Google), with `OIDC_AUDIENCE` and `OIDC_JWKS_URL`; a
    token's subject is bound to a project with `tessera identity bind`."""
    oidc_audience: str | None = None
    """The `aud` the external issuer's tokens must carry."""
    oidc_jwks_url: str | None = None
    """The external issuer's JWKS."""
    oidc_jwks_cache_seconds: int = Field(default=300, ge=0)
    """How long the external issuer's JWKS is kept (an unknown `kid` refetches it, at most every
    10 s)."""
    credential_cache_seconds: float = Field(default=1.0, ge=0, le=2)
    """A credential that checked out is trusted this long without a query (0 turns it off): a
    key revoked or expired in the database is refused by every process within it; refusals are
    never remembered."""

    ss58_prefix: int = Field(default=42, ge=0, le=16383)
    """The address prefix of wallets in responses."""

    public_url: str | None = Field(default=None, pattern=r"^https?://[^/?#\s]+(/[^?#\s]*)?$")
    """Where people reach this server, e.g. `https://tickets.example.com`: the start of a claim
    link's and a ticket's `url`. Unset: the base URL the creating request came to, which is
    right unless a proxy rewrites the host."""
    rate_limit_read: float = Field(default=0, ge=0)
    """Read requests a second per credential (API key, token client, OIDC subject), a token
    bucket holding one second's worth; 0 turns it off. Over it, 429 `{message}` with
    `Retry-After` and `RateLimit-Limit/-Remaining/-Reset`, the refused request taking no token.
    Shared by every process and host on the database (one more statement per request while
    on; on SQLite a short write transaction). For production we suggest 50 reads and 20
    writes: far above an app's steady use, low enough that a leaked key or a runaway loop
    cannot saturate the instance."""
    rate_limit_write: float = Field(default=0, ge=0)
    """Write requests a second per credential, as `RATE_LIMIT_READ` (0: off)."""
    idempotency_ttl_seconds: int = Field(default=86400, ge=60)
    """How long a write's answer is kept for a retry with the same `Idempotency-Key` (expired
    keys are purged by the job worker)."""
    claim_rate_per_address: int = Field(default=30, ge=1)
    """Claims a minute (a moving window) from one client address, counted in the database
    across every process and host; over it, 429 `{message}` with `Retry-After` (docs/api.md,
    Claim links)."""
    claim_rate_per_link: int = Field(default=120, ge=1)
    """Claims a minute (a moving window) on one claim link, across every process."""
    changes_retention_days: int = Field(default=30, ge=4)
    """How long the change feed keeps changes and webhook delivery attempts (the job worker
    purges older ones hourly); longer than the 3 days a failing webhook is retried."""
    webhooks_allow_private: bool = False
    """`true` allows `http` webhook URLs and loopback, private and link-local addresses
    (development, tests); off, a URL must be `https` on a public address, checked at
    registration and again at each delivery."""
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    """A webhook receiver must answer within this (connect and read), or the attempt failed."""

    chain_assethub_rpc_url: str | None = None
    """`ws://` or `wss://`; a chain without a URL is "not configured"."""
    chain_assethub_ss58_prefix: int = Field(default=0, ge=0, le=16383)
    """How Asset Hub addresses are shown."""
    chain_assethub_symbol: str = "DOT"
    """How Asset Hub amounts are shown."""
    chain_assethub_decimals: int = Field(default=10, ge=0, le=30)
    """How Asset Hub amounts are shown."""
    chain_westendassethub_rpc_url: str | None = None
    """`ws://` or `wss://`; a chain without a URL is "not configured"."""
    chain_westendassethub_ss58_prefix: int = Field(default=42, ge=0, le=16383)
    """How Westend Asset Hub addresses are shown."""
    chain_westendassethub_symbol: str = "WND"
    """How Westend Asset Hub amounts are shown."""
    chain_westendassethub_decimals: int = Field(default=12, ge=0, le=30)
    """How Westend Asset Hub amounts are shown."""
    chain_timeout_seconds: float = Field(default=30.0, gt=0)
    """Per chain RPC."""
    chain_request_timeout_seconds: float = Field(default=10.0, gt=0)
    """All chain reads of one request (then 503); less than `CHAIN_TIMEOUT_SECONDS` because on
    SQLite a write request holds the single write slot while it waits. Also each readiness
    check's limit."""
    chain_block_headroom: float = Field(default=0.1, ge=0, lt=1)
    """The share of a block's normal class that one batch of NFTs leaves to other traffic
    (docs/chain.md, At the chain's pace)."""
    chain_era_blocks: int = Field(default=256, ge=4, le=65536)
    """The blocks a signed extrinsic may take to land: its mortal era, a power of two."""
    chain_poll_seconds: float = Field(default=0.5, gt=0)
    """How often a worker looks at the chain while its extrinsics are in flight."""
    chain_resubmit_seconds: float = Field(default=12.0, gt=0)
    """How long a signer's next extrinsic may go unseen in a block (and out of the node's pool)
    before its bytes are submitted again; twice as long each time after, up to eight times."""

    worker_in_process: bool = True
    """`tessera serve` runs a job worker; turn off when separate `tessera worker`s run."""
    worker_poll_seconds: float = Field(default=1.0, gt=0)
    """How often an idle worker looks for jobs."""
    worker_heartbeat_seconds: float = Field(default=5.0, gt=0, le=3600)
    """Every job worker records a heartbeat this often; `GET /v1/health/ready` wants one within
    3 intervals."""
    job_max_attempts: int = Field(default=8, ge=1)
    """Attempts of a job before it fails (backoff 2^n s between them, at most 5 min)."""
    worker_slots: int = Field(default=4, ge=1, le=64)
    """Claims a worker runs at a time (a batch of NFTs waiting for its block holds one: the
    next is signed meanwhile)."""
    job_batch_gather_seconds: float = Field(default=1.0, ge=0)
    """A batch of jobs that is not full (a product's mints) is claimed once none has joined it
    for this long (docs/chain.md, At the chain's pace)."""
    job_batch_max_wait_seconds: float = Field(default=6.0, ge=0)
    """A batch of jobs that is not full is claimed once its oldest has waited this long (a
    block of the live chain), even while jobs keep joining it."""
    job_lease_seconds: int = Field(default=20, ge=4)
    """A running job's lease, renewed by its worker every quarter of it: a dead worker's job
    runs again within this long."""
    reconcile_interval_seconds: int = Field(default=3600, ge=0)
    """How often the worker reconciles the products with NFT activity in the last day with the
    chain (0: never; docs/chain.md, Reconciliation)."""
    reconcile_stuck_seconds: int = Field(default=900, ge=1)
    """An item or collection whose job waits longer than this is a `stuck` finding."""
    checkin_annul_seconds: int = Field(default=900, ge=0)
    """How long after a scan at the door it can be annulled (`POST /v1/checkins/annul`;
    docs/tickets.md)."""

    # The URL holds a password: the code reads it through ``smtp``.
    smtp_url: SecretStr | None = None
    """Email (docs/email.md): `smtp://host:port`, `smtp+starttls://user:password@host:587` or
    `smtps://user:password@host:465`, user and password percent-encoded. A secret, never
    logged. Unset, no email is written or sent."""
    mail_from: str | None = Field(default=None, max_length=320)
    """The sender of email, `Name <address>` or an address; needed with `SMTP_URL`."""

    apple_pass_type_id: str | None = Field(default=None, pattern=r"^pass\.[A-Za-z0-9.-]+$")
    """Apple Wallet passes (docs/wallets.md): the pass type identifier registered with Apple,
    e.g. `pass.com.example.tickets`. With the team id, certificate, key and WWDR certificate;
    all unset, tickets have no Apple Wallet pass."""
    apple_team_id: str | None = Field(default=None, pattern=r"^[A-Z0-9]{10}$")
    """The Apple developer team that owns the pass type id (10 characters)."""
    apple_pass_certificate: Path | None = None
    """The pass type id's certificate (PEM file)."""
    apple_pass_key: Path | None = None
    """The certificate's private key (PEM file; never logged)."""
    apple_pass_key_password: SecretStr | None = None
    """The key file's password, when it has one."""
    apple_wwdr_certificate: Path | None = None
    """Apple's WWDR intermediate certificate that issued the pass certificate (PEM file)."""
    google_wallet_issuer_id: str | None = Field(default=None, pattern=r"^[0-9]{1,32}$")
    """Google Wallet links (docs/wallets.md): the Wallet issuer id, with `GOOGLE_WALLET_KEY_FILE`;
    both unset, tickets have no Google Wallet link."""
    google_wallet_key_file: Path | None = None
    """The service account's JSON key file that signs the links (never logged)."""

    devchain_spec: Path | None = None
    """`tessera devchain`: the raw Asset Hub chain spec Chopsticks runs; unset, the spec Tessera
    carries (tessera.chain.devchain)."""
    devchain_cache: Path | None = None
    """`tessera devchain`: where Chopsticks is installed from the npm registry; unset, a
    checkout's `.cache/chopsticks` or, installed, `~/.cache/tessera/chopsticks`."""
    devchain_port: int = Field(default=9944, ge=1, le=65535)
    """`tessera devchain`: the port of its chain on 127.0.0.1."""

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

    @model_validator(mode="after")
    def _wallets_whole(self) -> "Settings":
        for names in (APPLE_WALLET_SETTINGS, GOOGLE_WALLET_SETTINGS):
            missing = [name for name in names if getattr(self, name) is None]
            if missing and len(missing) < len(names):
                listed = ", ".join(f"TESSERA_{name.upper()}" for name in missing)
                raise ValueError(f"{listed} missing: wallet settings go together")
        return self

    @property
    def apple_wallet(self) -> bool:
        """Whether Apple Wallet passes are configured."""
        return self.apple_pass_type_id is not None

    @property
    def google_wallet(self) -> bool:
        """Whether Google Wallet links are configured."""
        return self.google_wallet_issuer_id is not None

    @property
    def uses_dev_secrets(self) -> bool:
        return (
            self.secret_keys.get_secret_value() == DEV_SECRET_KEYS
            or self.hash_key.get_secret_value() == DEV_HASH_KEY
        )

    @property
    def session_database_url(self) -> str:
        """Where a command that needs a session of its own connects (``DATABASE_DIRECT_URL``)."""
        return self.database_direct_url or self.database_url

    def engine_connect_args(self, database_url: str) -> dict[str, int]:
        """SQLAlchemy's connect arguments for ``database_url`` (the migrations' engine): behind
        a transaction pooler, PostgreSQL statements are not kept prepared (neither asyncpg's
        cache nor SQLAlchemy's), as in ``Database``."""
        if self.db_transaction_pooler and database_url.startswith("postgresql"):
            return {"statement_cache_size": 0, "prepared_statement_cache_size": 0}
        return {}

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
    def smtp(self) -> SmtpServer | None:
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
