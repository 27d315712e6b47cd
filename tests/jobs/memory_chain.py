"""An in-memory Asset Hub: the ``ChainGateway`` the worker tests run the NFT handlers against.

It keeps the pallet rules the handlers rely on. A signer is the sr25519 public key of its seed.
A signed call is refused like the transaction pool refuses it when the signer cannot pay the fee;
otherwise the fee is charged and the call runs, or fails with the pallet's error name (the fee
stays paid, as on chain). Deposits and sends keep the payer alive (existential deposit). Every
accepted call lands in a block of its own, recorded in ``blocks``. Each signer has a nonce that
every accepted call spends: a signed collection creation submitted again after its nonce was
spent is refused as outdated, as the pool refuses it; ``held`` keeps submitted creations in the
pool (not yet in a block) until ``release``.
"""

import hashlib
import json
from dataclasses import dataclass, field

import sr25519

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

DOT = 10**10
FEE = DOT // 1000
DEPOSITS = Deposits(collection=10 * DOT, item=DOT // 100, existential=DOT // 100)

# Gateway method -> the call it submits (the name in the real gateway's errors).
CALLS = {
    "create_collection": "Nfts.create",
    "mint": "Nfts.mint",
    "set_metadata": "Nfts.set_metadata",
    "transfer": "Nfts.transfer",
    "send": "Balances.transfer_keep_alive",
}


class Crash(BaseException):
    """A worker dying right after the chain accepted its call (not an Exception: the worker
    records nothing)."""


@dataclass
class _Collection:
    owner: bytes
    max_supply: int | None
    items: set[int] = field(default_factory=set)


def signer_of(seed: bytes) -> bytes:
    return bytes(sr25519.pair_from_seed(seed)[0])


class MemoryChain:
    def __init__(self) -> None:
        self.free: dict[bytes, int] = {}
        self.collections: dict[int, _Collection] = {}
        self.owners: dict[tuple[int, int], bytes] = {}
        self.metadata: dict[tuple[int, int], str] = {}
        self.blocks: list[tuple[str, TxResult]] = []
        self.unreachable = False  # every call raises ChainUnreachable
        self.crash_after: str | None = None  # a gateway method: it succeeds, then raises Crash
        self.nonces: dict[bytes, int] = {}
        self.held = False  # submitted creations wait in ``pool`` until ``release``
        self.pool: list[Signed] = []

    # test set-up and assertions

    def fund(self, account: bytes, amount: int) -> None:
        self.free[account] = self.free.get(account, 0) + amount

    @property
    def calls(self) -> list[str]:
        return [name for name, _ in self.blocks]

    def tx(self, name: str) -> TxResult:
        """The last accepted call of that name."""
        return next(tx for call, tx in reversed(self.blocks) if call == name)

    # plumbing

    def _reach(self) -> None:
        if self.unreachable:
            raise ChainUnreachable("cannot reach ws://memory: connection refused")

    def _sign(self, seed: bytes, method: str) -> bytes:
        self._reach()
        signer = signer_of(seed)
        if self.free.get(signer, 0) < FEE:
            raise ChainError(f"{CALLS[method]}: rejected: the signer cannot pay the fee")
        self.free[signer] -= FEE
        self.nonces[signer] = self.nonces.get(signer, 0) + 1
        return signer

    def _withdraw(self, account: bytes, amount: int, method: str) -> None:
        if self.free.get(account, 0) - amount < DEPOSITS.existential:
            raise ChainError(f"{CALLS[method]}: InsufficientBalance")
        self.free[account] -= amount

    def _included(self, method: str) -> TxResult:
        number = len(self.blocks) + 1
        tx = TxResult(
            tx_hash="0x" + hashlib.sha256(b"tx%d" % number).hexdigest(),
            block_hash="0x" + hashlib.sha256(b"block%d" % number).hexdigest(),
            block_number=number,
        )
        self.blocks.append((CALLS[method], tx))
        if self.crash_after == method:
            raise Crash(f"died after {CALLS[method]}")
        return tx

    def _collection_of(self, signer: bytes, collection_id: int, method: str) -> _Collection:
        collection = self.collections.get(collection_id)
        if collection is None:
            raise ChainError(f"{CALLS[method]}: UnknownCollection")
        if collection.owner != signer:
            raise ChainError(f"{CALLS[method]}: NoPermission")
        return collection

    # reads

    def balance(self, account: bytes) -> Balance:
        self._reach()
        return Balance(free=self.free.get(account, 0), frozen=0)

    def deposits(self) -> Deposits:
        self._reach()
        return DEPOSITS

    def create_collection_fee(self, admin: bytes, *, max_supply: int | None) -> int:
        self._reach()
        return FEE

    def transfer_fee(self, sender: bytes, *, collection_id: int, item_id: int, dest: bytes) -> int:
        self._reach()
        return FEE

    def collections_owned_by(self, account: bytes) -> list[int]:
        self._reach()
        return sorted(i for i, c in self.collections.items() if c.owner == account)

    def collection(self, collection_id: int) -> Collection | None:
        self._reach()
        found = self.collections.get(collection_id)
        if found is None:
            return None
        return Collection(owner=found.owner, items=len(found.items), max_supply=found.max_supply)

    def item_owner(self, collection_id: int, item_id: int) -> bytes | None:
        self._reach()
        return self.owners.get((collection_id, item_id))

    def item_metadata(self, collection_id: int, item_id: int) -> str | None:
        self._reach()
        return self.metadata.get((collection_id, item_id))

    def collection_items(self, collection_id: int) -> dict[int, ChainItem]:
        self._reach()
        return {
            item: ChainItem(owner, self.metadata.get((collection, item)))
            for (collection, item), owner in self.owners.items()
            if collection == collection_id
        }

    def account_nonce(self, account: bytes) -> int:
        self._reach()
        return self.nonces.get(account, 0)

    # signed calls

    def sign_create_collection(self, seed: bytes, *, max_supply: int | None) -> Signed:
        self._reach()
        nonce = self.nonces.get(signer_of(seed), 0)
        call = {"seed": seed.hex(), "max_supply": max_supply, "nonce": nonce}
        return Signed("0x" + json.dumps(call).encode().hex(), nonce)

    def submit_create_collection(self, signed: Signed) -> tuple[int, TxResult]:
        self._reach()
        call = json.loads(bytes.fromhex(signed.extrinsic[2:]))
        seed = bytes.fromhex(call["seed"])
        if call["nonce"] < self.nonces.get(signer_of(seed), 0):
            raise ChainError("Nfts.create: rejected: Invalid Transaction: Transaction is outdated")
        if self.held:
            if signed not in self.pool:
                self.pool.append(signed)
            raise ChainUnreachable("Nfts.create: waiting in the pool")
        return self.create_collection(seed, max_supply=call["max_supply"])

    def release(self) -> None:
        """The creations waiting in the pool land (those whose nonce is still free)."""
        self.held, pool, self.pool = False, self.pool, []
        for signed in pool:
            try:
                self.submit_create_collection(signed)
            except ChainError:
                pass

    def create_collection(self, seed: bytes, *, max_supply: int | None) -> tuple[int, TxResult]:
        signer = self._sign(seed, "create_collection")
        self._withdraw(signer, DEPOSITS.collection, "create_collection")
        collection_id = len(self.collections)
        self.collections[collection_id] = _Collection(signer, max_supply)
        return collection_id, self._included("create_collection")

    def mint(self, seed: bytes, *, collection_id: int, item_id: int, owner: bytes) -> TxResult:
        signer = self._sign(seed, "mint")
        collection = self._collection_of(signer, collection_id, "mint")
        if item_id in collection.items:
            raise ChainError("Nfts.mint: AlreadyExists")
        if collection.max_supply is not None and len(collection.items) >= collection.max_supply:
            raise ChainError("Nfts.mint: MaxSupplyReached")
        self._withdraw(signer, DEPOSITS.item, "mint")
        collection.items.add(item_id)
        self.owners[collection_id, item_id] = owner
        return self._included("mint")

    def set_metadata(self, seed: bytes, *, collection_id: int, item_id: int, data: str) -> TxResult:
        signer = self._sign(seed, "set_metadata")
        if item_id not in self._collection_of(signer, collection_id, "set_metadata").items:
            raise ChainError("Nfts.set_metadata: UnknownItem")
        self.metadata[collection_id, item_id] = data
        return self._included("set_metadata")

    def transfer(self, seed: bytes, *, collection_id: int, item_id: int, dest: bytes) -> TxResult:
        signer = self._sign(seed, "transfer")
        owner = self.owners.get((collection_id, item_id))
        if owner is None:
            raise ChainError("Nfts.transfer: UnknownItem")
        if owner != signer:
            raise ChainError("Nfts.transfer: NoPermission")
        self.owners[collection_id, item_id] = dest
        return self._included("transfer")

    def send(self, seed: bytes, *, dest: bytes, amount: int) -> TxResult:
        signer = self._sign(seed, "send")
        if self.free.get(dest, 0) + amount < DEPOSITS.existential:
            raise ChainError("Balances.transfer_keep_alive: ExistentialDeposit")
        self._withdraw(signer, amount, "send")
        self.fund(dest, amount)
        return self._included("send")
