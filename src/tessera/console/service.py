"""Who may use the console: operator accounts, sign-in (with lockout), sessions and sign-out.

Operators sign in with an email and a password (an Argon2id hash, ``argon2-cffi``); after
``MAX_FAILURES`` wrong passwords in a row the account is locked for ``LOCK``, and a sign-in to
a locked account fails as a wrong password does, whatever the password. A project owner signs
in with a write API key of the project; the session ends when the key is revoked or expires.

A session is a random token in an ``HttpOnly``, ``SameSite=Lax`` cookie, ``Secure`` whenever
the request came over HTTPS (a loopback host included) and off loopback always: only plain http
on loopback goes without (``web.with_session``). The database keeps the token's keyed hash, who
it is, and a CSRF token that every form carries. Sessions last ``SESSION_HOURS``.
"""

import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from tessera.auth.principal import Principal
from tessera.auth.service import access_for_api_key
from tessera.console import repository
from tessera.console.repository import OperatorRow
from tessera.db import Database, Transaction, rerun_on_conflict
from tessera.errors import AppError, Conflict, CredentialInvalid, InvalidInput
from tessera.models.base import utcnow
from tessera.schemas import normalize_email
from tessera.toolkit.crypto import hashes_match, keyed_hash

MAX_FAILURES = 5
LOCK = timedelta(minutes=15)
SESSION_HOURS = 8
MIN_PASSWORD = 12
COOKIE = "tessera_console"

_hasher = PasswordHasher()
# Verified when the email is unknown, so that a wrong email takes as long as a wrong password.
_NOBODY = _hasher.hash(secrets.token_urlsafe(16))


class OperatorExists(Conflict):
    message = "an operator with this email exists"


class SignInRefused(AppError):
    status_code = 401
    message = "wrong email or password, or too many attempts: try again later"


class ProjectFacts(Protocol):
    """What a console user's credential carries of a project (``ProjectRow``)."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def require_activation(self) -> bool: ...

    @property
    def ticket_emails(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class ConsoleUser:
    """Who is signed in: an operator (every project) or a project's owner (that one only)."""

    token_hash: str
    csrf_token: str
    operator_id: uuid.UUID | None
    operator_email: str | None
    project_id: uuid.UUID | None  # a project owner's project

    @property
    def is_operator(self) -> bool:
        return self.operator_id is not None

    @property
    def name(self) -> str:
        return self.operator_email or "project owner"

    def may_see(self, project_id: uuid.UUID) -> bool:
        return self.is_operator or self.project_id == project_id

    def principal(self, project: ProjectFacts) -> Principal:
        """The project's write credential, as the API's use-cases take it."""
        who = f"console:operator:{self.operator_id}" if self.is_operator else "console:owner"
        return Principal(
            project_id=project.id,
            can_write=True,
            credential=who,
            require_activation=project.require_activation,
            ticket_emails=project.ticket_emails,
        )


def hash_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise InvalidInput(f"password: at least {MIN_PASSWORD} characters")
    return _hasher.hash(password)


@rerun_on_conflict
async def create_operator(database: Database, *, email: str, password: str) -> OperatorRow:
    row = {"email": normalize_email(email), "password_hash": hash_password(password)}
    async with database.transaction() as tx:
        created = await repository.add_operator(tx, row)
        if created is None:
            raise OperatorExists
        await tx.commit()
    return created


def _verified(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


@rerun_on_conflict
async def sign_in(database: Database, *, email: str, password: str, hash_key: bytes) -> str:
    """A new session's token for the operator, or ``SignInRefused`` (a wrong email, a wrong
    password, or a locked account: the same answer)."""
    email = normalize_email(email)
    async with database.transaction() as tx:
        operator = await repository.operator_to_sign_in(tx, email)
        now = utcnow()
        if operator is None:
            _verified(_NOBODY, password)
            raise SignInRefused
        locked = operator.locked_until is not None and operator.locked_until > now
        if locked or not _verified(operator.password_hash, password):
            if not locked:
                failures, locked_until = operator.failed_sign_ins + 1, operator.locked_until
                if failures >= MAX_FAILURES:
                    failures, locked_until = 0, now + LOCK
                await repository.set_sign_ins(
                    tx,
                    operator.id,
                    failed_sign_ins=failures,
                    locked_until=locked_until,
                    password_hash=operator.password_hash,
                )
                await tx.commit()
            raise SignInRefused
        password_hash = operator.password_hash
        if _hasher.check_needs_rehash(password_hash):
            password_hash = _hasher.hash(password)
        await repository.set_sign_ins(
            tx, operator.id, failed_sign_ins=0, locked_until=None, password_hash=password_hash
        )
        token = await _new_session(tx, hash_key, operator_id=operator.id)
        await tx.commit()
    return token


@rerun_on_conflict
async def sign_in_with_key(database: Database, *, api_key: str, hash_key: bytes) -> str:
    """A new session's token for the owner of the project whose write key this is."""
    try:
        async with database.transaction() as tx:
            access = await access_for_api_key(
                tx, api_key.strip(), digest=keyed_hash(hash_key, api_key.strip())
            )
            if not access.principal.can_write:
                raise SignInRefused("a read key cannot sign in: paste a write key")
            token = await _new_session(
                tx,
                hash_key,
                project_id=access.principal.project_id,
                api_key_id=access.key_id,
            )
            await tx.commit()
    except CredentialInvalid:
        raise SignInRefused("this is not a valid write key of a project") from None
    return token


async def _new_session(tx: Transaction, hash_key: bytes, **who: uuid.UUID) -> str:
    token = secrets.token_urlsafe(32)
    await repository.add_session(
        tx,
        {
            "token_hash": keyed_hash(hash_key, token),
            "csrf_token": secrets.token_urlsafe(32),
            "expires_at": utcnow() + timedelta(hours=SESSION_HOURS),
            **who,
        },
    )
    return token


async def session_of(
    database: Database, token: str | None, *, hash_key: bytes
) -> ConsoleUser | None:
    """Who the cookie's token signs in, or None (unknown, expired, or its key revoked)."""
    if not token or len(token) > 100:
        return None
    digest = keyed_hash(hash_key, token)
    row = await database.read(repository.read_session, digest)
    if row is None or not hashes_match(row.token_hash, digest):
        return None
    return ConsoleUser(
        token_hash=row.token_hash,
        csrf_token=row.csrf_token,
        operator_id=row.operator_id,
        operator_email=row.operator_email,
        project_id=row.project_id,
    )


@rerun_on_conflict
async def sign_out(database: Database, user: ConsoleUser) -> None:
    async with database.transaction() as tx:
        await repository.end_session(tx, user.token_hash)
        await repository.purge_sessions(tx, utcnow())  # and forget the expired ones
        await tx.commit()
