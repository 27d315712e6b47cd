"""How the gateway's parts become Asset Hub calls, and how a landed extrinsic's events say what
became of each part; also the pool's refusals in words. Pure functions: the substrate adapter
(``tessera.chain.substrate``) feeds them what it reads.

An extrinsic is a ``Utility.force_batch`` of its parts, each part a ``Utility.batch_all`` of its
calls when it has several (an NFT's mint and its metadata land together or not at all). Why
``force_batch`` and not ``batch_all`` around the parts: one NFT that cannot be minted (it exists
already, a deposit the signer cannot pay) fails alone and says why (``Utility.ItemFailed``)
instead of taking the whole batch down with it. An extrinsic of one part of one call (a
collection's creation, a filler) is sent as that call.
"""

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tessera.chain.gateway import (
    CreateCollection,
    Filler,
    Fund,
    Mint,
    Outcome,
    Part,
    PartOutcome,
    Rejected,
    Transfer,
)

# A pallet call: (pallet, call, arguments), accounts as 32-byte public keys.
Call = tuple[str, str, dict[str, Any]]

ISSUER_ONLY_MINTING = {
    "mint_type": "Issuer",
    "price": None,
    "start_block": None,
    "end_block": None,
    "default_item_settings": 0,
}
# The era's period is a power of two in this range (the SCALE encoding of a mortal era).
MIN_ERA, MAX_ERA = 4, 1 << 16


_KINDS: dict[str, type[Any]] = {
    "mint": Mint,
    "transfer": Transfer,
    "fund": Fund,
    "collection": CreateCollection,
    "filler": Filler,
}
_KIND_OF = {kind: name for name, kind in _KINDS.items()}
_ACCOUNTS = {"owner", "dest", "admin"}


def parts_json(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """The parts as JSON (accounts in hex), to be read back by ``parts_of``: an extrinsic's
    events are read against the parts it was signed with."""
    return [
        {
            "kind": _KIND_OF[type(part)],
            **{
                name: value.hex() if isinstance(value, bytes) else value
                for name, value in dataclasses.asdict(part).items()
            },
        }
        for part in parts
    ]


def parts_of(data: Sequence[Mapping[str, Any]]) -> list[Part]:
    parts: list[Part] = []
    for entry in data:
        values = {
            name: bytes.fromhex(value) if name in _ACCOUNTS and value is not None else value
            for name, value in entry.items()
            if name != "kind"
        }
        parts.append(_KINDS[entry["kind"]](**values))
    return parts


def calls_of(part: Part) -> list[Call]:
    match part:
        case Mint(collection_id, item_id, owner, metadata):
            calls: list[Call] = []
            if owner is not None:
                mint = {"collection": collection_id, "item": item_id, "mint_to": owner}
                calls.append(("Nfts", "mint", mint | {"witness_data": None}))
            if metadata is not None:
                meta = {"collection": collection_id, "item": item_id, "data": metadata}
                calls.append(("Nfts", "set_metadata", meta))
            return calls
        case Transfer(collection_id, item_id, dest):
            return [
                ("Nfts", "transfer", {"collection": collection_id, "item": item_id, "dest": dest})
            ]
        case Fund(dest, amount):
            return [("Balances", "transfer_keep_alive", {"dest": dest, "value": amount})]
        case CreateCollection(admin, max_supply):
            config = {"settings": 0, "max_supply": max_supply, "mint_settings": ISSUER_ONLY_MINTING}
            return [("Nfts", "create", {"admin": admin, "config": config})]
        case Filler():
            return [("System", "remark", {"remark": "0x"})]
    raise TypeError(f"not a part: {part!r}")


def is_bare(parts: Sequence[Part]) -> bool:
    """Whether the extrinsic is its one call, not a ``force_batch``."""
    return len(parts) == 1 and len(calls_of(parts[0])) == 1


def call_name(parts: Sequence[Part]) -> str:
    """The extrinsic's call as the chain names it (``Utility.force_batch``, ``Nfts.create``)."""
    if is_bare(parts):
        module, function, _ = calls_of(parts[0])[0]
        return f"{module}.{function}"
    return "Utility.force_batch"


def era_period(blocks: int) -> int:
    """The mortal era's period for ``blocks``: the next power of two, within the encoding's
    range."""
    return min(max(1 << max(blocks - 1, 0).bit_length(), MIN_ERA), MAX_ERA)


def tx_hash(extrinsic: str) -> str:
    """An extrinsic's hash (blake2b-256 of its bytes), as the chain names it."""
    return (
        "0x"
        + hashlib.blake2b(bytes.fromhex(extrinsic.removeprefix("0x")), digest_size=32).hexdigest()
    )


def read_outcome(
    events: Sequence[Mapping[str, Any]],
    parts: Sequence[Part],
    error_name: Callable[[Any], str],
) -> Outcome:
    """Each part's fate from its extrinsic's events, in order.

    ``force_batch`` closes each part with one ``Utility.ItemCompleted`` or ``ItemFailed``; a
    part of several calls is a ``batch_all`` whose own events come first and end with its
    ``BatchCompleted`` (a failed one leaves no event of its own: its changes are undone), so the
    part's ``ItemCompleted`` is the one that follows that. ``error_name`` names a dispatch
    error (``Nfts.AlreadyExists``).
    """
    fee = 0
    failed: str | None = None
    for event in events:
        key = (event["module_id"], event["event_id"])
        if key == ("TransactionPayment", "TransactionFeePaid"):
            fee = int(event["attributes"]["actual_fee"])
        elif key == ("System", "ExtrinsicFailed"):
            failed = error_name(event["attributes"]["dispatch_error"])
    if failed is not None:
        return Outcome(fee, tuple(PartOutcome(failed) for _ in parts))
    if is_bare(parts):
        return Outcome(fee, (PartOutcome(None, _created(events)),))
    nested = [len(calls_of(part)) > 1 for part in parts]
    outcomes: list[PartOutcome] = []
    inner_done, created = False, None
    for event in events:
        if len(outcomes) == len(parts):
            break
        key = (event["module_id"], event["event_id"])
        if key == ("Nfts", "Created"):
            created = int(event["attributes"]["collection"])
        elif key == ("Utility", "ItemFailed"):
            outcomes.append(PartOutcome(error_name(event["attributes"]["error"])))
            inner_done, created = False, None
        elif key == ("Utility", "BatchCompleted") and nested[len(outcomes)]:
            inner_done = True
        elif key == ("Utility", "ItemCompleted") and (inner_done or not nested[len(outcomes)]):
            outcomes.append(PartOutcome(None, created))
            inner_done, created = False, None
    if len(outcomes) != len(parts):
        raise ValueError(f"{len(outcomes)} outcomes in the events of {len(parts)} parts")
    return Outcome(fee, tuple(outcomes))


def _created(events: Sequence[Mapping[str, Any]]) -> int | None:
    for event in events:
        if (event["module_id"], event["event_id"]) == ("Nfts", "Created"):
            return int(event["attributes"]["collection"])
    return None


def refusal(detail: Any) -> Rejected | None:
    """The pool's refusal of an extrinsic (a JSON-RPC error) as ``Rejected``; None when the
    pool has these bytes already (or saw them land a moment ago).

    Substrate nodes say ``{"code": 1010, "message": "Invalid Transaction", "data": "Transaction
    is outdated"}``, Chopsticks ``{"message": "{\\"invalid\\":{\\"stale\\":null}}"}``.
    """
    message = detail.get("message", "") if isinstance(detail, dict) else str(detail)
    data = detail.get("data", "") if isinstance(detail, dict) else ""
    path: list[str] = []
    try:
        reason = json.loads(message)
    except (TypeError, ValueError):
        reason = None
    while isinstance(reason, dict) and reason:
        key = next(iter(reason))
        path.append(key)
        reason = reason[key]
    said = " ".join([*path, message, str(data)]).lower()
    if "stale" in said or "outdated" in said:
        return Rejected("rejected: its nonce is spent", spent=True)
    if "payment" in said or "pay some fees" in said:
        return Rejected("rejected: the signer cannot pay the fee", dead=True)
    if any(
        word in said for word in ("badproof", "bad signature", "ancient", "exhausts", "exhaust")
    ):
        return Rejected("rejected: " + (".".join(path) or str(data) or message), dead=True)
    if "already imported" in said or "temporarily banned" in said:
        return None
    return Rejected("rejected: " + (".".join(path) or " ".join(filter(None, [message, str(data)]))))
