"""The one exception tree and the only place error bodies are built.

| status | body                       | raised for                                               |
|--------|----------------------------|----------------------------------------------------------|
| 400    | {"errors": ["field: why"]} | unparsable bodies, wrong types, bounds, NUL characters   |
| 401    | {"message"}                | missing, invalid, expired or revoked credential; a wrong |
|        |                            | or missing metrics token or wallet pass token            |
| 403    | {"message"}                | read credential on a write; a claim link for another     |
|        |                            | email; metrics from another host without a token         |
| 404    | {"message"}                | no such object in the caller's project; a wallet that is |
|        |                            | not configured                                           |
| 405    | {"message"}, Allow         | a method the path does not answer (Allow names them all) |
| 408    | {"message"}                | request headers too slow (tessera.web.server)            |
|        | {"errors": ["body: ..."]}  | a request body too slow (tessera.web.middleware)         |
| 409    | {"message"}                | state conflicts (duplicates, stock, limits, ownership)   |
| 410    | {"message"}                | a claim link expired or used up                          |
| 413    | {"message"}                | body larger than TESSERA_MAX_BODY_BYTES                  |
| 422    | {"message"}                | an Idempotency-Key sent again with another request       |
| 429    | {"message"}, Retry-After   | too many claims from one address or on one link; a       |
|        |                            | credential over TESSERA_RATE_LIMIT_READ/WRITE            |
| 503    | {"message"}                | a chain is unreachable; too many connections (server.py) |
|        | {"message"}, Retry-After   | the database refused or lost a connection, or gave none  |
|        |                            | within TESSERA_DB_POOL_TIMEOUT_SECONDS (tessera.db); a   |
|        |                            | transaction aborted as a deadlock at its last attempt    |
| 500    | {"message", "request_id"}  | anything unexpected (traceback goes to the log only)     |
"""

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel


class ErrorList(BaseModel):
    errors: list[str]


class ErrorMessage(BaseModel):
    message: str


class AppError(Exception):
    status_code = 500
    message = "internal error"

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.message
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return {"message": self.message}

    def headers(self) -> dict[str, str] | None:
        return None


class InvalidInput(AppError):
    """A 400 found by a use-case rather than by the schema (same body as schema errors)."""

    status_code = 400

    def __init__(self, *problems: str) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(problems))

    def body(self) -> dict[str, Any]:
        return {"errors": self.problems}


# 401
class Unauthorized(AppError):
    status_code = 401
    message = "missing or invalid credential"


class CredentialMissing(Unauthorized):
    message = "credential required: send an x-api-key header or an Authorization: Bearer token"


class CredentialInvalid(Unauthorized):
    message = "invalid, expired or revoked credential"


class ClientCredentialsInvalid(Unauthorized):
    message = "invalid client_id or client_secret"


class MetricsTokenInvalid(Unauthorized):
    message = "metrics need an Authorization: Bearer header with TESSERA_METRICS_TOKEN"


class PassTokenInvalid(Unauthorized):
    message = "a wallet pass's web service needs Authorization: ApplePass and the pass's token"


# 403
class WritePermissionRequired(AppError):
    status_code = 403
    message = "this credential is read-only; a write credential is required"


class DoorOnly(AppError):
    status_code = 403
    message = (
        "this is a check-in key: it may scan tickets, annul and upload scans and read the sync, "
        "nothing else"
    )


class ClaimNotForYou(AppError):
    status_code = 403
    message = "this claim link was made for another email address"


class MetricsNotLocal(AppError):
    status_code = 403
    message = "metrics answer this host only, unless TESSERA_METRICS_TOKEN is set"


# 404
class NotFound(AppError):
    status_code = 404
    message = "not found"


class UserNotFound(NotFound):
    message = "user not found"


class EventNotFound(NotFound):
    message = "event not found"


class ProductNotFound(NotFound):
    message = "product not found"


class ProductItemNotFound(NotFound):
    message = "product item not found"


class OrderNotFound(NotFound):
    message = "order not found"


class ProjectNotFound(NotFound):
    message = "project not found"


class ApiKeyNotFound(NotFound):
    message = "api key not found"


class JobNotFound(NotFound):
    message = "job not found"


class ClientNotFound(NotFound):
    message = "token client not found"


class WalletNotFound(NotFound):
    message = "wallet not found"


class WebhookNotFound(NotFound):
    message = "webhook endpoint not found"


class DeliveryNotFound(NotFound):
    message = "webhook delivery not found"


class ClaimLinkNotFound(NotFound):
    message = "claim link not found"


class WalletNotConfigured(NotFound):
    """A phone wallet this server has no settings for (the message names them)."""


class PassTypeNotFound(NotFound):
    message = "not this server's pass type"


# 410
class ClaimLinkClosed(AppError):
    """Expired or used up: the link existed, and will not work again."""

    status_code = 410


# 429
class TooManyRequests(AppError):
    """Over a rate limit: ``Retry-After`` says when to try again; ``limit`` (per second, for a
    credential's limit) adds the ``RateLimit-*`` headers."""

    status_code = 429

    def __init__(self, message: str, *, retry_after: int, limit: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.limit = limit

    def headers(self) -> dict[str, str] | None:
        headers = {"Retry-After": str(self.retry_after)}
        if self.limit is not None:
            headers |= {
                "RateLimit-Limit": str(self.limit),
                "RateLimit-Remaining": "0",
                "RateLimit-Reset": str(self.retry_after),
            }
        return headers


class TooManyClaims(TooManyRequests):
    pass


class Conflict(AppError):
    status_code = 409
    message = "conflict"


class JobNotFailed(Conflict):
    pass


class IdempotencyKeyRunning(Conflict):
    message = "a request with this Idempotency-Key is still running; retry when it has answered"


# 422
class IdempotencyKeyReused(AppError):
    status_code = 422
    message = (
        "this Idempotency-Key was used for another request (method, path, query or body): "
        "use a new key for a new request"
    )


class UserNotActivated(Conflict):
    pass


class ChallengeUnusable(Conflict):
    pass


class WalletTaken(Conflict):
    message = "this address is already linked to a user of this project"


class WalletInUse(Conflict):
    pass


class NftHeldByUser(Conflict):
    pass


class NftHeldOutside(Conflict):
    message = (
        "the NFT of this item sits in a wallet no user of the project holds: the item cannot be "
        "redeemed or transferred until its NFT comes back"
    )


class NftsNotMinted(Conflict):
    pass


class CheckinNotFound(NotFound):
    message = "no check-in was made with this nonce"


class CheckinKeyNotFound(NotFound):
    message = "the project has no live check-in key of this kid"


class AnnulWindowClosed(Conflict):
    message = "this check-in can no longer be annulled: its window has passed"


class MailNotConfigured(Conflict):
    message = "this server sends no email: TESSERA_SMTP_URL is not set"


class ClientRevoked(Conflict):
    message = "the token client is revoked; create a new one"


class EmailTaken(Conflict):
    pass


class ReferenceIdTaken(Conflict):
    pass


class OrderNumberTaken(Conflict):
    pass


class EventDatesOutOfOrder(Conflict):
    pass


class EventInUse(Conflict):
    message = "event is still referenced by products with issued items or sales"


class ProductNotClaimable(Conflict):
    message = "product is not claimable"


class ProductInactive(Conflict):
    message = "product is not active"


class ProductNotTransferable(Conflict):
    message = "product items of this product are not transferable"


class ProductOutOfStock(Conflict):
    message = "product is out of stock"


class CollectionFull(Conflict):
    message = "the product's NFT collection has reached max_items"


class PerAccountLimitReached(Conflict):
    pass


class ReputationTooLow(Conflict):
    pass


class ReputationWouldBeNegative(Conflict):
    pass


class ItemNotOwnedBySender(Conflict):
    message = "the sender does not own this product item"


class ItemFullyRedeemed(Conflict):
    message = "product item is fully redeemed"


class TransferToSelf(Conflict):
    message = "the recipient must be another user than the sender"


class OrderNotPending(Conflict):
    pass


class ChainNotConfigured(Conflict):
    pass


class InsufficientCollectionBalance(Conflict):
    pass


class StockBelowIssued(Conflict):
    pass


class RedemptionQuantityBelowCount(Conflict):
    pass


class NftSettingsFixed(Conflict):
    pass


class ItemsIssuedWithoutNft(Conflict):
    pass


# 503
class ChainUnavailable(AppError):
    status_code = 503
    message = "chain unavailable"


class DatabaseUnavailable(AppError):
    """The database refused a connection (its connection slots used up, a restart), gave none
    within the pool's timeout, or lost it mid-request. What the request had not committed is
    rolled back; it may be sent again (with its ``Idempotency-Key``, if it had one)."""

    status_code = 503
    message = "the database is unavailable: try again shortly"
    retry_after = 2

    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": str(self.retry_after)}


class TransactionConflict(DatabaseUnavailable):
    """PostgreSQL aborted the request's transaction to let another one through (a deadlock, a
    serialization failure), and the use-case's last attempt met the same (``db.conflicts``):
    nothing was changed, and the request may be sent again at once."""

    message = "the database gave way to another request: nothing was changed, send it again"
    retry_after = 1


# 413
class PayloadTooLarge(AppError):
    status_code = 413
    message = "request body too large"


class RequestBodyTooSlow(InvalidInput):
    """The body did not arrive within its deadline (a 408 in the errors shape, and closed)."""

    status_code = 408

    def headers(self) -> dict[str, str] | None:
        return {"Connection": "close"}


# 500 (rendered by the request middleware, outside FastAPI's handlers)
class InternalError(AppError):
    status_code = 500

    def __init__(self, request_id: str) -> None:
        super().__init__("internal error")
        self.request_id = request_id

    def body(self) -> dict[str, Any]:
        return {"message": self.message, "request_id": self.request_id}


def validation_messages(errors: Sequence[Any]) -> list[str]:
    """One readable "field: why" line per problem, from pydantic/FastAPI error dicts."""
    lines = []
    for error in errors:
        # A field name comes from the request: shown, but never with a NUL (no JSON text of
        # Tessera's carries one, as the OpenAPI promises).
        loc = [str(part).replace("\x00", "\\u0000") for part in error.get("loc", ())]
        if loc and loc[0] in {"body", "query", "path", "header"}:
            loc = loc[1:]
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        if error.get("type") == "json_invalid":
            message = "malformed JSON: " + str(error.get("ctx", {}).get("error", message))
            loc = []
        elif error.get("type") == "missing":
            message = "field required"
        elif error.get("type") == "extra_forbidden":
            message = "unknown field"
        lines.append(f"{'.'.join(loc)}: {message}" if loc else message)
    return lines


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer."""
    described: dict[int, tuple[type[BaseModel], str]] = {
        400: (ErrorList, "Invalid input: one entry per problem, naming the field."),
        401: (ErrorMessage, "Missing, invalid, expired or revoked credential."),
        403: (ErrorMessage, "The credential is read-only."),
        404: (ErrorMessage, "No such object in this project."),
        409: (ErrorMessage, "The request conflicts with the current state."),
        410: (ErrorMessage, "The claim link expired or is used up."),
        429: (ErrorMessage, "Too many requests (a rate limit): retry after Retry-After seconds."),
        413: (ErrorMessage, "Request body too large."),
        422: (ErrorMessage, "The Idempotency-Key was sent before with another request."),
        503: (
            ErrorMessage,
            "A chain this request reads is unreachable, or the database is (then with "
            "Retry-After).",
        ),
    }
    return {s: {"model": described[s][0], "description": described[s][1]} for s in statuses}
