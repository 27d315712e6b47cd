"""Bearer JWTs: Tessera's own issuer (client credentials, rotating ES256 keys) and one external
OIDC issuer whose token subjects are bound to projects with ``tessera identity bind``.

Own tokens carry the project (``pid``) and scope, so verifying them needs no database query once
the public keys are cached. Signing keys rotate every ``signing_key_rotation_seconds``: the newest
key signs; keys stay published in the JWKS for one rotation period plus the longest token life.
"""

import asyncio
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tessera.auth import repository
from tessera.auth.principal import Permission, Principal
from tessera.auth.repository import (
    BindingRow,
    ClientRow,
    ClientState,
    ProjectRules,
    SigningKeyRow,
)
from tessera.config import Settings
from tessera.db import Database, Rows, Transaction
from tessera.errors import (
    ClientCredentialsInvalid,
    ClientRevoked,
    CredentialInvalid,
)
from tessera.models.base import utcnow
from tessera.toolkit.crypto import Sealed, SecretBox, hashes_match, keyed_hash

ALGORITHM = "ES256"
MAX_TOKEN_TTL = 86400
REFETCH_SECONDS = 10
SCOPES: dict[str, set[str]] = {"read": {"read"}, "write": {"read", "write"}}
CLIENT_ID_START = "tsc_"


@dataclass(frozen=True, slots=True)
class IssuedClient:
    client_id: str
    client_secret: str


async def create_client(
    tx: Transaction, *, project_id: uuid.UUID, permission: Permission, hash_key: bytes
) -> IssuedClient:
    client_id = f"{CLIENT_ID_START}{secrets.token_hex(10)}"
    client_secret = secrets.token_urlsafe(32)
    await repository.add_client(
        tx,
        {
            "project_id": project_id,
            "client_id": client_id,
            "secret_hash": keyed_hash(hash_key, client_secret),
            "permission": permission,
        },
    )
    return IssuedClient(client_id, client_secret)


async def list_clients(rows: Rows, *, project_id: uuid.UUID) -> list[ClientRow]:
    return await repository.list_clients(rows, project_id)


async def revoke_client(tx: Transaction, *, project_id: uuid.UUID, client_id: str) -> ClientRow:
    """No new token for the client, and its tokens stop working (within the credential cache's
    lifetime on every process). Revoking again keeps the first time."""
    return await repository.revoke_client(tx, project_id, client_id, utcnow())


async def rotate_client(
    tx: Transaction, *, project_id: uuid.UUID, client_id: str, hash_key: bytes
) -> tuple[ClientRow, str]:
    """A new secret for an active client (the client and the secret): the old secret gets no
    new token, and the tokens issued before stop working (as for a revocation), since a
    rotation usually answers a leak."""
    client = await repository.lock_client(tx, project_id, client_id)
    if client.revoked_at is not None:
        raise ClientRevoked
    client_secret = secrets.token_urlsafe(32)
    rotated = await repository.set_client_secret(
        tx, client.id, keyed_hash(hash_key, client_secret), utcnow()
    )
    return rotated, client_secret


def signing_key_aad(kid: str) -> bytes:
    return b"tessera/signing-key/" + kid.encode()


class TokenIssuer:
    """Signs and verifies Tessera's own tokens; caches public keys per process."""

    def __init__(self, settings: Settings, box: SecretBox) -> None:
        self.settings = settings
        self.box = box
        self._public: dict[str, Any] = {}
        self._signing: tuple[str, Any, float] | None = None  # kid, private key, created (epoch)

    async def _signing_key(self, database: Database) -> tuple[str, Any]:
        rotation = self.settings.signing_key_rotation_seconds
        if self._signing and time.time() - self._signing[2] < rotation:
            return self._signing[0], self._signing[1]
        row = await database.read(repository.newest_signing_key)
        if row is None or (utcnow() - row.created_at).total_seconds() >= rotation:
            row = await self._new_signing_key(database)
        private = serialization.load_der_private_key(
            self.box.open(Sealed(row.secret_key_id, row.secret_blob), aad=signing_key_aad(row.kid)),
            password=None,
        )
        self._signing = (row.kid, private, row.created_at.timestamp())
        return row.kid, private

    async def _new_signing_key(self, database: Database) -> SigningKeyRow:
        kid = secrets.token_hex(8)
        private = ec.generate_private_key(ec.SECP256R1())
        der = private.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private.public_key()))
        jwk |= {"kid": kid, "alg": ALGORITHM, "use": "sig"}
        sealed = self.box.seal(der, aad=signing_key_aad(kid))
        # A transaction of its own, committed at once: the key must be visible to every process
        # before a token signed with it leaves. (So no caller mints inside a transaction.)
        async with database.transaction() as tx:
            row = await repository.add_signing_key(
                tx,
                {
                    "kid": kid,
                    "algorithm": ALGORITHM,
                    "public_jwk": json.dumps(jwk),
                    "secret_key_id": sealed.key_id,
                    "secret_blob": sealed.blob,
                    "created_at": utcnow(),
                },
            )
            await tx.commit()
        return row

    async def mint(
        self,
        database: Database,
        *,
        project_id: uuid.UUID,
        scope: Permission,
        subject: str,
        ttl: int | None = None,
    ) -> tuple[str, int]:
        """A token for a project the caller knows exists (a client's, or checked first)."""
        ttl = min(ttl or self.settings.token_ttl_seconds, MAX_TOKEN_TTL)
        kid, private = await self._signing_key(database)
        now = int(time.time())
        claims = {
            "iss": self.settings.jwt_issuer,
            "aud": self.settings.jwt_audience,
            "sub": subject,
            "pid": str(project_id),
            "scope": " ".join(sorted(SCOPES[scope])),
            "iat": now,
            "nbf": now,
            "exp": now + ttl,
            "jti": uuid.uuid4().hex,
        }
        return jwt.encode(claims, private, algorithm=ALGORITHM, headers={"kid": kid}), ttl

    async def exchange_client_credentials(
        self,
        database: Database,
        *,
        client_id: str,
        client_secret: str,
        scope: Permission | None,
    ) -> tuple[str, int]:
        """OAuth2 client credentials: a valid, unrevoked client gets at most its own scope."""
        client = await database.read(repository.client_by_id, client_id)
        secret_hash = keyed_hash(self.settings.hash_key_bytes, client_secret)
        if client is None or client.revoked_at is not None:
            raise ClientCredentialsInvalid
        if not hashes_match(client.secret_hash, secret_hash):
            raise ClientCredentialsInvalid
        granted = scope or client.permission
        if granted == "write" and client.permission != "write":
            raise ClientCredentialsInvalid("this client may only request the read scope")
        return await self.mint(
            database, project_id=client.project_id, scope=granted, subject=client.client_id
        )

    async def jwks(self, database: Database) -> dict[str, list[dict[str, Any]]]:
        window = self.settings.signing_key_rotation_seconds + MAX_TOKEN_TTL
        since = utcnow() - timedelta(seconds=window)
        rows = await database.read(repository.signing_keys_since, since)
        return {"keys": [json.loads(row.public_jwk) for row in rows]}

    async def verify(self, database: Database, token: str, kid: str | None) -> Principal:
        key = self._public.get(kid or "")
        if key is None:
            row = await database.read(repository.signing_key, kid) if kid else None
            if row is None:
                raise CredentialInvalid
            key = self._public[row.kid] = jwt.PyJWK(json.loads(row.public_jwk)).key
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=self.settings.jwt_audience,
                issuer=self.settings.jwt_issuer,
                options={"require": ["exp", "iat", "iss", "aud", "pid", "scope"]},
            )
            project_id = uuid.UUID(claims["pid"])
        except (jwt.PyJWTError, ValueError) as exc:
            raise CredentialInvalid from exc
        # A token outlives nothing it names: a project deleted since (or never there), or a
        # client revoked or rotated since the token was issued, is a 401.
        subject = str(claims.get("sub"))
        client_id = subject if subject.startswith(CLIENT_ID_START) else None
        rules, client = await database.read(_project_and_client, project_id, client_id)
        if client_id is not None:
            if client is None or client.revoked_at is not None:
                raise CredentialInvalid
            # iat is in whole seconds: a token of the rotation's second stays valid.
            if client.rotated_at is not None and claims["iat"] < int(client.rotated_at.timestamp()):
                raise CredentialInvalid
        scopes = set(str(claims["scope"]).split())
        return Principal(
            project_id,
            "write" in scopes,
            f"client:{subject}",
            require_activation=rules.require_activation,
            ticket_emails=rules.ticket_emails,
        )


async def _project_and_client(
    rows: Rows, project_id: uuid.UUID, client_id: str | None
) -> tuple[ProjectRules, ClientState | None]:
    """The rules of the project a token names (a project that does not exist is a 401) and,
    for a token client's token, the state of that client (None: no such client)."""
    rules = await _project_rules(rows, project_id)
    if client_id is None:
        return rules, None
    return rules, await repository.client_state(rows, project_id, client_id)


class ExternalIssuer:
    """An external OIDC issuer: JWKS fetched over HTTP and cached; subjects bound to projects."""

    def __init__(self, *, issuer: str, audience: str, jwks_url: str, cache_seconds: int) -> None:
        self.issuer = issuer
        self.audience = audience
        self.jwks_url = jwks_url
        self.cache_seconds = cache_seconds
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = -1e9
        self._lock = asyncio.Lock()

    def _age(self) -> float:
        return time.monotonic() - self._fetched_at

    async def _key(self, kid: str | None) -> jwt.PyJWK:
        if kid not in self._keys or self._age() >= self.cache_seconds:
            async with self._lock:
                stale = self._age() >= self.cache_seconds
                # An unknown kid may mean the issuer rotated: refetch, at most every 10 s.
                if stale or (kid not in self._keys and self._age() > REFETCH_SECONDS):
                    await self._fetch()
        key = self._keys.get(kid or "")
        if key is None:
            raise CredentialInvalid
        return key

    async def _fetch(self) -> None:
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                response = await client.get(self.jwks_url)
                response.raise_for_status()
            keys = jwt.PyJWKSet.from_dict(response.json()).keys
        except (httpx.HTTPError, jwt.PyJWTError, ValueError) as exc:
            raise CredentialInvalid("identity provider keys are unavailable") from exc
        self._keys = {key.key_id: key for key in keys if key.key_id}
        self._fetched_at = time.monotonic()

    async def verify(self, database: Database, token: str, kid: str | None) -> Principal:
        jwk = await self._key(kid)
        try:
            claims = jwt.decode(
                token,
                jwk.key,
                algorithms=[jwk.algorithm_name] if jwk.algorithm_name else ["RS256", "ES256"],
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise CredentialInvalid from exc
        binding, rules = await database.read(_binding_and_rules, self.issuer, claims["sub"])
        return Principal(
            binding.project_id,
            binding.permission == "write",
            f"oidc:{self.issuer}#{claims['sub']}",
            require_activation=rules.require_activation,
            ticket_emails=rules.ticket_emails,
        )


async def _binding_and_rules(
    rows: Rows, issuer: str, subject: str
) -> tuple[BindingRow, ProjectRules]:
    """The binding of an external subject and the rules of its project (a 401 without)."""
    binding = await repository.identity_binding(rows, issuer, subject)
    if binding is None:
        raise CredentialInvalid("this identity is not bound to a project")
    return binding, await _project_rules(rows, binding.project_id)


async def _project_rules(rows: Rows, project_id: uuid.UUID) -> ProjectRules:
    """The project's rules (``Principal``); a project that does not exist is a 401."""
    rules = await repository.project_rules(rows, project_id)
    if rules is None:
        raise CredentialInvalid
    return rules
