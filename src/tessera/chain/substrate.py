"""The chain gateway on substrate-interface (pallet-nfts, pallet-balances, System)."""

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from scalecodec.utils.ss58 import ss58_decode, ss58_encode
from substrateinterface import Keypair, KeypairType, SubstrateInterface
from substrateinterface.exceptions import SubstrateRequestException
from websocket import WebSocketException, create_connection

from tessera.chain.extrinsics import (
    calls_of,
    era_period,
    read_outcome,
    refusal,
    tx_hash,
)
from tessera.chain.gateway import (
    PAGE_SIZE,
    Account,
    Balance,
    BlockLimits,
    ChainError,
    ChainItem,
    ChainUnreachable,
    Collection,
    CreateCollection,
    Deposits,
    Head,
    Inclusion,
    Outcome,
    Part,
    Rejected,
    Signed,
    Weight,
)

T = TypeVar("T")
# Storage keys read in one round trip (state_queryStorageAt).
KEYS_PER_READ = 1000
# What signing adds to a call's length: the signer, signature, era, nonce, tip, mode.
SIGNED_OVERHEAD = 110
# Blocks whose extrinsic hashes, and whose decoded events, are kept (a full block's events
# take most of a second to decode; every waiting extrinsic of the block asks for them).
BLOCKS_REMEMBERED = 256
EVENTS_REMEMBERED = 8


class SubstrateGateway:
    """One websocket to one chain; calls are serialised (the client is not thread-safe)."""

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        self.url = url
        # What errors name: a provider's key often sits in the URL's path or query.
        parts = urlsplit(url)
        self.endpoint = f"{parts.scheme}://{parts.hostname}" + (
            f":{parts.port}" if parts.port else ""
        )
        self.timeout = timeout
        self._client: SubstrateInterface | None = None
        self._lock = threading.RLock()
        self._block_hashes: OrderedDict[str, list[str]] = OrderedDict()
        self._events: OrderedDict[str, list[Any]] = OrderedDict()

    # plumbing

    def _substrate(self) -> SubstrateInterface:
        if self._client is None:
            try:
                self._client = SubstrateInterface(
                    url=self.url, ws_options={"timeout": self.timeout}, auto_reconnect=True
                )
            except (OSError, WebSocketException, SubstrateRequestException) as exc:
                raise ChainUnreachable(f"cannot reach {self.endpoint}: {exc}") from exc
        return self._client

    def _call(self, work: Callable[[SubstrateInterface], T]) -> T:
        with self._lock:
            try:
                return work(self._substrate())
            except ChainError:
                raise
            except (OSError, WebSocketException) as exc:
                self._client = None  # reconnect on the next call
                raise ChainUnreachable(f"lost {self.endpoint}: {exc}") from exc
            except SubstrateRequestException as exc:
                raise ChainError(str(exc)) from exc

    def _address(self, substrate: SubstrateInterface, account: bytes) -> str:
        return str(ss58_encode(account, ss58_format=substrate.ss58_format))

    @staticmethod
    def _public_key(address: str) -> bytes:
        return bytes.fromhex(ss58_decode(address))

    def _keypair(self, substrate: SubstrateInterface, seed: bytes) -> Keypair:
        return Keypair.create_from_seed(
            "0x" + seed.hex(), ss58_format=substrate.ss58_format, crypto_type=KeypairType.SR25519
        )

    # reads

    def balance(self, account: bytes) -> Balance:
        def work(s: SubstrateInterface) -> Balance:
            data = s.query("System", "Account", [self._address(s, account)]).value["data"]
            return Balance(free=int(data["free"]), frozen=int(data.get("frozen", 0)))

        return self._call(work)

    def deposits(self) -> Deposits:
        def work(s: SubstrateInterface) -> Deposits:
            return Deposits(
                collection=int(s.get_constant("Nfts", "CollectionDeposit").value),
                item=int(s.get_constant("Nfts", "ItemDeposit").value),
                existential=int(s.get_constant("Balances", "ExistentialDeposit").value),
            )

        return self._call(work)

    def create_collection_fee(self, admin: bytes, *, max_supply: int | None) -> int:
        return self.weigh(admin, [CreateCollection(admin, max_supply)]).fee

    def collections_owned_by(self, account: bytes) -> list[int]:
        def work(s: SubstrateInterface) -> list[int]:
            entries = s.query_map("Nfts", "CollectionAccount", [self._address(s, account)])
            return sorted(int(_key(key)) for key, _ in entries)

        return self._call(work)

    def collection(self, collection_id: int) -> Collection | None:
        def work(s: SubstrateInterface) -> Collection | None:
            details = s.query("Nfts", "Collection", [collection_id]).value
            if details is None:
                return None
            config = s.query("Nfts", "CollectionConfigOf", [collection_id]).value or {}
            return Collection(
                owner=self._public_key(details["owner"]),
                items=int(details["items"]),
                max_supply=config.get("max_supply"),
            )

        return self._call(work)

    def item_owner(self, collection_id: int, item_id: int) -> bytes | None:
        def work(s: SubstrateInterface) -> bytes | None:
            item = s.query("Nfts", "Item", [collection_id, item_id]).value
            return None if item is None else self._public_key(item["owner"])

        return self._call(work)

    def collection_items(self, collection_id: int) -> dict[int, ChainItem]:
        def work(s: SubstrateInterface) -> dict[int, ChainItem]:
            metadata = {
                int(_key(key)): value.value["data"]
                for key, value in s.query_map(
                    "Nfts", "ItemMetadataOf", [collection_id], page_size=PAGE_SIZE
                )
            }
            return {
                int(_key(key)): ChainItem(
                    owner=self._public_key(value.value["owner"]),
                    metadata=metadata.get(int(_key(key))),
                )
                for key, value in s.query_map("Nfts", "Item", [collection_id], page_size=PAGE_SIZE)
            }

        return self._call(work)

    def item_metadata(self, collection_id: int, item_id: int) -> str | None:
        def work(s: SubstrateInterface) -> str | None:
            meta = s.query("Nfts", "ItemMetadataOf", [collection_id, item_id]).value
            return None if meta is None else meta["data"]

        return self._call(work)

    def account(self, account: bytes) -> Account:
        def work(s: SubstrateInterface) -> Account:
            info = s.query("System", "Account", [self._address(s, account)]).value
            return Account(nonce=int(info["nonce"]), free=int(info["data"]["free"]))

        return self._call(work)

    def accounts(self, accounts: Sequence[bytes]) -> dict[bytes, Account]:
        def work(s: SubstrateInterface) -> dict[bytes, Account]:
            found = dict.fromkeys(accounts, Account(nonce=0, free=0))
            for start in range(0, len(accounts), KEYS_PER_READ):
                chunk = accounts[start : start + KEYS_PER_READ]
                storage = [
                    s.create_storage_key("System", "Account", [self._address(s, a)]) for a in chunk
                ]
                owners = {id(key): account for key, account in zip(storage, chunk, strict=True)}
                for key, value in s.query_multi(storage):
                    if value.value is not None:
                        info = value.value
                        account = owners[id(key)]
                        found[account] = Account(int(info["nonce"]), int(info["data"]["free"]))
            return found

        return self._call(work)

    def metadata_deposit(self, data: str) -> int:
        def work(s: SubstrateInterface) -> int:
            base = int(s.get_constant("Nfts", "MetadataDepositBase").value)
            per_byte = int(s.get_constant("Nfts", "DepositPerByte").value)
            return base + per_byte * len(data.encode())

        return self._call(work)

    def items(
        self, collection_id: int, item_ids: Sequence[int], *, final: bool = False
    ) -> dict[int, ChainItem]:
        def work(s: SubstrateInterface) -> dict[int, ChainItem]:
            at = s.get_chain_finalised_head() if final else None
            owners: dict[int, bytes] = {}
            metadata: dict[int, str] = {}
            for start in range(0, len(item_ids), KEYS_PER_READ // 2):
                chunk = item_ids[start : start + KEYS_PER_READ // 2]
                keys = [
                    s.create_storage_key(storage, function, [collection_id, item_id])
                    for item_id in chunk
                    for storage, function in (("Nfts", "Item"), ("Nfts", "ItemMetadataOf"))
                ]
                for key, value in s.query_multi(keys, block_hash=at):
                    if value.value is None:
                        continue
                    item_id = int(key.params[1])
                    if key.storage_function == "Item":
                        owners[item_id] = self._public_key(value.value["owner"])
                    else:
                        metadata[item_id] = value.value["data"]
            return {
                item_id: ChainItem(owner=owner, metadata=metadata.get(item_id))
                for item_id, owner in owners.items()
            }

        return self._call(work)

    # extrinsics

    def limits(self) -> BlockLimits:
        def work(s: SubstrateInterface) -> BlockLimits:
            weights = s.get_constant("System", "BlockWeights").value["per_class"]["normal"]
            base = weights["base_extrinsic"]
            length = s.get_constant("System", "BlockLength").value["max"]["normal"]
            return BlockLimits(
                ref_time=int(weights["max_extrinsic"]["ref_time"]) - int(base["ref_time"]),
                proof_size=int(weights["max_extrinsic"]["proof_size"]) - int(base["proof_size"]),
                length=int(length),
                total_ref_time=int(weights["max_total"]["ref_time"]) - int(base["ref_time"]),
                total_proof_size=int(weights["max_total"]["proof_size"]) - int(base["proof_size"]),
            )

        return self._call(work)

    def weigh(self, signer: bytes, parts: Sequence[Part]) -> Weight:
        def work(s: SubstrateInterface) -> Weight:
            call = self._compose(s, parts)
            payer = Keypair(public_key=signer, ss58_format=s.ss58_format)
            info = s.get_payment_info(call, payer)
            return Weight(
                ref_time=int(info["weight"]["ref_time"]),
                proof_size=int(info["weight"]["proof_size"]),
                length=len(call.data) + SIGNED_OVERHEAD,
                fee=int(info["partialFee"]),
            )

        return self._call(work)

    def sign(self, seed: bytes, parts: Sequence[Part], *, nonce: int, era_blocks: int) -> Signed:
        def work(s: SubstrateInterface) -> Signed:
            call = self._compose(s, parts)
            # The era starts at the last finalized block, which every node has.
            current = s.get_block_number(s.get_chain_finalised_head())
            period = era_period(era_blocks)
            extrinsic = s.create_signed_extrinsic(
                call=call,
                keypair=self._keypair(s, seed),
                era={"period": period, "current": current},
                nonce=nonce,
            )
            data = str(extrinsic.data)
            return Signed(data, nonce, tx_hash(data), current + 1, current + period)

        return self._call(work)

    def submit(self, extrinsic: str) -> None:
        def work(s: SubstrateInterface) -> None:
            try:
                s.rpc_request("author_submitExtrinsic", [extrinsic])
            except SubstrateRequestException as exc:
                rejected = refusal(exc.args[0] if exc.args else {})
                if rejected is not None:  # None: the pool has these bytes already
                    raise rejected from exc

        self._call(work)

    def submit_many(self, extrinsics: Sequence[str]) -> list[Rejected | None]:
        """All sent on a connection of their own before any answer is read: a node validates
        them side by side, where one after the other each would wait for the last."""
        if len(extrinsics) <= 1:
            return [self._submitted(data) for data in extrinsics]
        try:
            connection = create_connection(self.url, timeout=self.timeout)
        except (OSError, WebSocketException) as exc:
            raise ChainUnreachable(f"cannot reach {self.endpoint}: {exc}") from exc
        results: list[Rejected | None] = [None] * len(extrinsics)
        try:
            for index, data in enumerate(extrinsics):
                request = {"jsonrpc": "2.0", "id": index, "method": "author_submitExtrinsic"}
                connection.send(json.dumps(request | {"params": [data]}))
            for _ in extrinsics:
                answer = json.loads(connection.recv())
                if "error" in answer:
                    results[int(answer["id"])] = refusal(answer["error"])
        except (OSError, WebSocketException) as exc:
            raise ChainUnreachable(f"lost {self.endpoint}: {exc}") from exc
        finally:
            connection.close()
        return results

    def _submitted(self, data: str) -> Rejected | None:
        try:
            self.submit(data)
        except Rejected as rejected:
            return rejected
        return None

    def pending(self) -> set[str]:
        def work(s: SubstrateInterface) -> set[str]:
            waiting = s.rpc_request("author_pendingExtrinsics", [])["result"]
            return {tx_hash(data) for data in waiting}

        return self._call(work)

    def head(self) -> Head:
        def work(s: SubstrateInterface) -> Head:
            best = s.rpc_request("chain_getHeader", [])["result"]["number"]
            final_hash = s.rpc_request("chain_getFinalizedHead", [])["result"]
            final = s.rpc_request("chain_getHeader", [final_hash])["result"]["number"]
            return Head(best=int(best, 16), finalized=int(final, 16))

        return self._call(work)

    def block_hash(self, number: int) -> str | None:
        def work(s: SubstrateInterface) -> str | None:
            found: str | None = s.rpc_request("chain_getBlockHash", [number])["result"]
            return found

        return self._call(work)

    def find(self, tx_hashes: Sequence[str], *, first: int, last: int) -> dict[str, Inclusion]:
        wanted = set(tx_hashes)

        def work(s: SubstrateInterface) -> dict[str, Inclusion]:
            found: dict[str, Inclusion] = {}
            for number in range(max(first, 0), last + 1):
                block = s.rpc_request("chain_getBlockHash", [number])["result"]
                if block is None:
                    break
                for index, landed in enumerate(self._hashes_in(s, block)):
                    if landed in wanted:
                        found[landed] = Inclusion(number, block, index)
                if len(found) == len(wanted):
                    break
            return found

        return self._call(work)

    def outcome(self, inclusion: Inclusion, parts: Sequence[Part]) -> Outcome:
        def work(s: SubstrateInterface) -> Outcome:
            events = [
                event.value
                for event in self._events_of(s, inclusion.block_hash)
                if event.value["extrinsic_idx"] == inclusion.index
            ]
            return read_outcome(events, parts, lambda error: _error_name(s, error))

        return self._call(work)

    def _hashes_in(self, s: SubstrateInterface, block: str) -> list[str]:
        """The hashes of a block's extrinsics (raw: nothing decoded), remembered."""
        hashes = self._block_hashes.get(block)
        if hashes is None:
            extrinsics = s.rpc_request("chain_getBlock", [block])["result"]["block"]["extrinsics"]
            hashes = [tx_hash(data) for data in extrinsics]
            _remember(self._block_hashes, block, hashes, BLOCKS_REMEMBERED)
        return hashes

    def _events_of(self, s: SubstrateInterface, block: str) -> list[Any]:
        """A block's events, decoded once (a full block holds thousands)."""
        events = self._events.get(block)
        if events is None:
            events = s.get_events(block)
            _remember(self._events, block, events, EVENTS_REMEMBERED)
        return events

    def _compose(self, s: SubstrateInterface, parts: Sequence[Part]) -> Any:
        """The call of an extrinsic of ``parts`` (see ``tessera.chain.gateway``)."""
        composed = [[self._call_value(s, call) for call in calls_of(part)] for part in parts]
        if len(composed) == 1 and len(composed[0]) == 1:
            value = composed[0][0]
        else:
            value = {
                "call_module": "Utility",
                "call_function": "force_batch",
                "call_args": {"calls": [_atomic(calls) for calls in composed]},
            }
        return s.compose_call(value["call_module"], value["call_function"], value["call_args"])

    def _call_value(self, s: SubstrateInterface, call: tuple[str, str, dict[str, Any]]) -> Any:
        module, function, args = call
        accounts = {"mint_to", "dest", "admin"}
        args = {k: self._address(s, v) if k in accounts else v for k, v in args.items()}
        return {"call_module": module, "call_function": function, "call_args": args}

    def close(self) -> None:
        # A call stuck on a hung node holds the lock until its own timeout: do not wait for it
        # at shutdown (the process is going away and takes the socket with it).
        if not self._lock.acquire(timeout=1):
            return
        try:
            if self._client is not None:
                self._client.close()
                self._client = None
        finally:
            self._lock.release()


def _key(key: Any) -> Any:
    """A storage map key as a plain value (query_map yields SCALE objects or values)."""
    return key.value if hasattr(key, "value") else key


def _atomic(calls: list[Any]) -> Any:
    """A part: its one call, or its calls in a ``batch_all``."""
    if len(calls) == 1:
        return calls[0]
    return {"call_module": "Utility", "call_function": "batch_all", "call_args": {"calls": calls}}


def _error_name(s: SubstrateInterface, error: Any) -> str:
    """A dispatch error in words: ``Nfts.AlreadyExists``, ``Token.FundsUnavailable``."""
    if isinstance(error, dict) and "Module" in error:
        module = error["Module"]
        index, code = (
            (module[0], module[1])
            if isinstance(module, tuple)
            else (
                module["index"],
                module["error"],
            )
        )
        if isinstance(code, str):  # [u8; 4], the first byte the error's index
            code = int(code[2:4], 16)
        pallet = s.metadata.get_pallet_by_index(index)
        found = s.metadata.get_module_error(module_index=index, error_index=code)
        return f"{pallet.name}.{found.name}"
    if isinstance(error, dict) and error:
        kind, detail = next(iter(error.items()))
        return f"{kind}.{detail}" if isinstance(detail, str) else str(kind)
    return str(error)


def _remember(cache: "OrderedDict[str, Any]", key: str, value: Any, limit: int) -> None:
    cache[key] = value
    while len(cache) > limit:
        cache.popitem(last=False)
