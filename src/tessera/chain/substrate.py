"""The chain gateway on substrate-interface (pallet-nfts, pallet-balances, System)."""

import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from scalecodec.base import ScaleBytes
from scalecodec.utils.ss58 import ss58_decode, ss58_encode
from substrateinterface import Keypair, KeypairType, SubstrateInterface
from substrateinterface.exceptions import SubstrateRequestException
from websocket import WebSocketException

from tessera.chain.gateway import (
    Balance,
    ChainError,
    ChainItem,
    ChainUnreachable,
    Collection,
    Deposits,
    Signed,
    TxResult,
)

T = TypeVar("T")
# Storage maps are read by prefix this many entries per RPC round trip.
PAGE_SIZE = 1000

ISSUER_ONLY_MINTING = {
    "mint_type": "Issuer",
    "price": None,
    "start_block": None,
    "end_block": None,
    "default_item_settings": 0,
}


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

    def _sign(self, substrate: SubstrateInterface, seed: bytes, call: Any) -> Any:
        keypair = self._keypair(substrate, seed)
        # Chopsticks does not serve account_nextIndex; system_accountNextIndex counts the pool too.
        nonce = substrate.rpc_request("system_accountNextIndex", [keypair.ss58_address])["result"]
        return substrate.create_signed_extrinsic(call=call, keypair=keypair, nonce=nonce)

    def _submit(
        self, substrate: SubstrateInterface, seed: bytes, call: Any
    ) -> tuple[Any, TxResult]:
        name = f"{call.call_module['name']}.{call.call_function['name']}"
        return self._included(substrate, self._sign(substrate, seed, call), name)

    def _included(
        self, substrate: SubstrateInterface, extrinsic: Any, name: str
    ) -> tuple[Any, TxResult]:
        try:
            receipt = substrate.submit_extrinsic(extrinsic, wait_for_inclusion=True)
        except SubstrateRequestException as exc:
            raise ChainError(f"{name}: {_rejection(exc)}") from exc
        if not receipt.is_success:
            error = receipt.error_message or {}
            error_name = error.get("name", "unknown") if isinstance(error, dict) else str(error)
            raise ChainError(f"{name}: {error_name}")
        block = substrate.get_block_number(receipt.block_hash)
        return receipt, TxResult(receipt.extrinsic_hash, receipt.block_hash, int(block))

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

    def _create_call(self, s: SubstrateInterface, admin: bytes, max_supply: int | None) -> Any:
        config = {"settings": 0, "max_supply": max_supply, "mint_settings": ISSUER_ONLY_MINTING}
        return s.compose_call(
            "Nfts", "create", {"admin": self._address(s, admin), "config": config}
        )

    def create_collection_fee(self, admin: bytes, *, max_supply: int | None) -> int:
        def work(s: SubstrateInterface) -> int:
            call = self._create_call(s, admin, max_supply)
            return int(
                s.get_payment_info(call, Keypair(public_key=admin, ss58_format=s.ss58_format))[
                    "partialFee"
                ]
            )

        return self._call(work)

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

    def account_nonce(self, account: bytes) -> int:
        def work(s: SubstrateInterface) -> int:
            return int(s.query("System", "Account", [self._address(s, account)]).value["nonce"])

        return self._call(work)

    def item_metadata(self, collection_id: int, item_id: int) -> str | None:
        def work(s: SubstrateInterface) -> str | None:
            meta = s.query("Nfts", "ItemMetadataOf", [collection_id, item_id]).value
            return None if meta is None else meta["data"]

        return self._call(work)

    def transfer_fee(self, sender: bytes, *, collection_id: int, item_id: int, dest: bytes) -> int:
        def work(s: SubstrateInterface) -> int:
            call = s.compose_call(
                "Nfts",
                "transfer",
                {"collection": collection_id, "item": item_id, "dest": self._address(s, dest)},
            )
            payer = Keypair(public_key=sender, ss58_format=s.ss58_format)
            return int(s.get_payment_info(call, payer)["partialFee"])

        return self._call(work)

    # writes (signed with a custodial seed)

    def create_collection(self, seed: bytes, *, max_supply: int | None) -> tuple[int, TxResult]:
        signed = self.sign_create_collection(seed, max_supply=max_supply)
        return self.submit_create_collection(signed)

    def sign_create_collection(self, seed: bytes, *, max_supply: int | None) -> Signed:
        def work(s: SubstrateInterface) -> Signed:
            admin = self._keypair(s, seed).public_key
            extrinsic = self._sign(s, seed, self._create_call(s, admin, max_supply))
            return Signed(str(extrinsic.data), int(extrinsic.value["nonce"]))

        return self._call(work)

    def submit_create_collection(self, signed: Signed) -> tuple[int, TxResult]:
        def work(s: SubstrateInterface) -> tuple[int, TxResult]:
            extrinsic = s.create_scale_object("Extrinsic", data=ScaleBytes(signed.extrinsic))
            extrinsic.decode()
            receipt, tx = self._included(s, extrinsic, "Nfts.create")
            for event in receipt.triggered_events:
                value = event.value
                if value["module_id"] == "Nfts" and value["event_id"] == "Created":
                    return int(value["attributes"]["collection"]), tx
            raise ChainError("Nfts.create succeeded without a Created event")

        return self._call(work)

    def mint(self, seed: bytes, *, collection_id: int, item_id: int, owner: bytes) -> TxResult:
        def work(s: SubstrateInterface) -> TxResult:
            call = s.compose_call(
                "Nfts",
                "mint",
                {
                    "collection": collection_id,
                    "item": item_id,
                    "mint_to": self._address(s, owner),
                    "witness_data": None,
                },
            )
            return self._submit(s, seed, call)[1]

        return self._call(work)

    def set_metadata(self, seed: bytes, *, collection_id: int, item_id: int, data: str) -> TxResult:
        def work(s: SubstrateInterface) -> TxResult:
            call = s.compose_call(
                "Nfts", "set_metadata", {"collection": collection_id, "item": item_id, "data": data}
            )
            return self._submit(s, seed, call)[1]

        return self._call(work)

    def transfer(self, seed: bytes, *, collection_id: int, item_id: int, dest: bytes) -> TxResult:
        def work(s: SubstrateInterface) -> TxResult:
            call = s.compose_call(
                "Nfts",
                "transfer",
                {"collection": collection_id, "item": item_id, "dest": self._address(s, dest)},
            )
            return self._submit(s, seed, call)[1]

        return self._call(work)

    def send(self, seed: bytes, *, dest: bytes, amount: int) -> TxResult:
        def work(s: SubstrateInterface) -> TxResult:
            call = s.compose_call(
                "Balances", "transfer_keep_alive", {"dest": self._address(s, dest), "value": amount}
            )
            return self._submit(s, seed, call)[1]

        return self._call(work)

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


def _rejection(exc: SubstrateRequestException) -> str:
    """A transaction pool rejection in words, e.g. {"invalid":{"payment":null}}."""
    detail = exc.args[0] if exc.args else {}
    message = detail.get("message", "") if isinstance(detail, dict) else str(detail)
    try:
        reason = json.loads(message)
    except (TypeError, ValueError):
        return f"rejected: {message or detail}"
    path = []
    while isinstance(reason, dict) and reason:
        key = next(iter(reason))
        path.append(key)
        reason = reason[key]
    if path == ["invalid", "payment"]:
        return "rejected: the signer cannot pay the fee"
    return "rejected: " + ".".join(path or [message])
