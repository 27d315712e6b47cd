"""An in-memory Asset Hub: the whole ``ChainGateway`` the worker tests run the NFT handlers
against (no Node.js, no runtime).

Its state (``memory_pallets.State``: balances, nonces, collections, NFTs and their metadata)
changes only in blocks, by the pallet rules of ``memory_pallets``; a test may change it behind
Tessera's back (``fund``, or ``owners``/``metadata``/``collections`` directly, or ``act``: an
extrinsic of a key used outside Tessera).

Extrinsics (``memory_extrinsics``): ``sign`` encodes them, mortal from the last final block.
``submit`` (``submit_many``: several together) refuses them as the transaction pool does
(``Rejected``: spent when the nonce is; dead when the era has passed, the signer cannot pay the
fee, or the proof is bad), keeps the same bytes once, and keeps a future nonce waiting. By
default each submit builds a block of every pool extrinsic that applies, in nonce order
(Chopsticks' instant mode); ``manual``: blocks are built by ``build()`` only. An extrinsic that
lands pays its fee, spends its nonce, and each of its parts succeeds or fails alone
(``outcome``). ``head().finalized`` follows the best block ``finality_lag`` behind, unless held
(``hold_finality``); ``reorg(n)`` drops the last ``n`` blocks before they are final: the state
goes back, their extrinsics are not returned to the pool. ``unreachable``: every call raises
``ChainUnreachable``; ``crash_before`` / ``crash_after`` (a method's name): its next call
raises ``Crash`` before, or after, it ran.
"""

import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from tessera.chain.extrinsics import era_period
from tessera.chain.gateway import (
    Account,
    Balance,
    BlockLimits,
    ChainError,
    ChainItem,
    ChainUnreachable,
    Collection,
    Deposits,
    Head,
    Inclusion,
    Outcome,
    Part,
    Rejected,
    Signed,
    Weight,
)
from tests.jobs.memory_extrinsics import (
    BASE_WEIGHT,
    FEE,
    FEE_PER_PART,
    PART_WEIGHT,
    Applied,
    Block,
    Tx,
    decode,
    encode,
    fee,
    signer_of,
)
from tests.jobs.memory_pallets import (
    DEPOSITS,
    DOT,
    MemoryCollection,
    State,
    metadata_deposit,
    run_part,
)

__all__ = ["DEPOSITS", "DOT", "FEE", "FEE_PER_PART", "Crash", "MemoryChain", "fee", "signer_of"]

ROOMY = 10**15  # limits that never bind
GENESIS = "0x" + "00" * 32
UNREACHABLE = "cannot reach ws://memory: connection refused"

P = ParamSpec("P")
T = TypeVar("T")


class Crash(BaseException):
    """A worker dying in a chain call (not an Exception: the worker records nothing)."""


def _rpc(
    method: Callable[Concatenate["MemoryChain", P], T],
) -> Callable[Concatenate["MemoryChain", P], T]:
    """A gateway call: one at a time, refused when unreachable, crashing when told to."""
    name = method.__name__

    def call(chain: "MemoryChain", /, *args: P.args, **kwargs: P.kwargs) -> T:
        with chain.lock:
            if chain.unreachable:
                raise ChainUnreachable(UNREACHABLE)
            if chain.crash_before == name:
                chain.crash_before = None
                raise Crash(f"died before {name}")
            result = method(chain, *args, **kwargs)
            if chain.crash_after == name:
                chain.crash_after = None
                raise Crash(f"died after {name}")
            return result

    return call


class MemoryChain:
    def __init__(self, *, per_extrinsic: int = 10) -> None:
        self.state = State()
        self.blocks: list[Block] = []
        self.pool: dict[str, Tx] = {}  # by hash, in the order they came
        self.signed: list[Signed] = []  # every extrinsic ``sign`` made
        self.per_extrinsic = per_extrinsic
        self.manual = False
        self.finality_lag = 0
        self.unreachable = False
        self.crash_before: str | None = None
        self.crash_after: str | None = None
        self.lock = threading.RLock()
        self._held = False
        self._finalized = 0
        self._before: dict[int, State] = {}  # the state before each block not final yet
        self._built = 0  # blocks ever built: a dropped block's successor has another hash
        self._signatures = 0

    # the state, to set up and to look at (what a test changes goes behind Tessera's back)

    @property
    def free(self) -> dict[bytes, int]:
        return self.state.free

    @property
    def nonces(self) -> dict[bytes, int]:
        return self.state.nonces

    @property
    def collections(self) -> dict[int, MemoryCollection]:
        return self.state.collections

    @property
    def owners(self) -> dict[tuple[int, int], bytes]:
        return self.state.owners

    @property
    def metadata(self) -> dict[tuple[int, int], str]:
        return self.state.metadata

    def fund(self, account: bytes, amount: int) -> None:
        self.state.free[account] = self.state.free.get(account, 0) + amount

    @property
    def extrinsics(self) -> list[Applied]:
        """Every extrinsic of the best chain, in order."""
        return [applied for block in self.blocks for applied in block.extrinsics]

    @property
    def calls(self) -> list[str]:
        """Each landed extrinsic's call, as the chain names it (``Utility.force_batch``)."""
        return [applied.call for applied in self.extrinsics]

    def act(self, seed: bytes, *parts: Part) -> Applied:
        """``seed``'s key acts outside Tessera: an extrinsic with its next nonce, in a block of
        its own, whatever the pool holds."""
        with self.lock:
            signer = signer_of(seed)
            if self.state.spendable(signer) < fee(len(parts)):
                raise Rejected("rejected: the signer cannot pay the fee", dead=True)
            signed = self._sign(seed, parts, self.state.nonces.get(signer, 0), 64)
            tx = decode(signed.extrinsic)
            before, number = self.state.copy(), len(self.blocks) + 1
            applied = self._apply(tx)
            self._add_block(number, before, [applied])
            return applied

    # blocks and finality

    def build(self) -> Block:
        """A block of every pool extrinsic that applies (maybe none)."""
        with self.lock:
            block = self._build(empty=True)
            assert block is not None
            return block

    def hold_finality(self) -> None:
        with self.lock:
            self._final()
            self._held = True

    def release_finality(self) -> None:
        with self.lock:
            self._held = False
            self._final()

    def reorg(self, count: int) -> None:
        """The last ``count`` blocks are dropped (none of them final): the state goes back to
        before them; their extrinsics are not returned to the pool (submitted again, the same
        bytes land again)."""
        with self.lock:
            first = len(self.blocks) - count + 1
            assert count > 0 and first > self._final(), "a final block is never dropped"
            self.state = self._before[first]
            del self.blocks[first - 1 :]
            self._before = {n: state for n, state in self._before.items() if n < first}

    def _final(self) -> int:
        if not self._held:
            self._finalized = max(self._finalized, len(self.blocks) - self.finality_lag)
        for number in [n for n in self._before if n <= self._finalized]:
            del self._before[number]  # the state after a final block is never wanted back
        return self._finalized

    def _state_at_final(self) -> State:
        final = self._final()
        return self.state if final >= len(self.blocks) else self._before[final + 1]

    def _build(self, *, empty: bool) -> Block | None:
        number, before = len(self.blocks) + 1, self.state.copy()
        applied: list[Applied] = []
        progress = True
        while progress:
            progress = False
            for tx in list(self.pool.values()):
                nonce = self.state.nonces.get(tx.signer, 0)
                if tx.nonce < nonce or number >= tx.valid_until:  # spent, or its era passed
                    del self.pool[tx.tx_hash]
                elif tx.nonce == nonce and tx.valid_from <= number:
                    del self.pool[tx.tx_hash]
                    if self.state.spendable(tx.signer) >= fee(len(tx.parts)):
                        applied.append(self._apply(tx))
                        progress = True
        if not applied and not empty:
            return None
        return self._add_block(number, before, applied)

    def _apply(self, tx: Tx) -> Applied:
        paid = fee(len(tx.parts))
        self.state.free[tx.signer] -= paid
        self.state.nonces[tx.signer] = tx.nonce + 1
        outcomes = tuple(run_part(self.state, tx.signer, part) for part in tx.parts)
        return Applied(tx, paid, outcomes)

    def _add_block(self, number: int, before: State, applied: list[Applied]) -> Block:
        self._built += 1
        digest = hashlib.blake2b(f"block {self._built}".encode(), digest_size=32).hexdigest()
        block = Block(number, "0x" + digest, tuple(applied))
        self.blocks.append(block)
        self._before[number] = before
        self._final()
        return block

    # extrinsics

    def _sign(self, seed: bytes, parts: Sequence[Part], nonce: int, era_blocks: int) -> Signed:
        final = self._final()
        self._signatures += 1
        era = (final + 1, final + era_period(era_blocks))  # from the last final block
        return encode(seed, parts, nonce=nonce, era=era, salt=self._signatures)

    @_rpc
    def limits(self) -> BlockLimits:
        return BlockLimits(
            ref_time=BASE_WEIGHT + PART_WEIGHT * self.per_extrinsic,
            proof_size=ROOMY,
            length=ROOMY,
            total_ref_time=ROOMY,
            total_proof_size=ROOMY,
        )

    @_rpc
    def weigh(self, signer: bytes, parts: Sequence[Part]) -> Weight:
        count = len(parts)
        return Weight(
            BASE_WEIGHT + PART_WEIGHT * count, 1000 * count, 110 + 100 * count, fee(count)
        )

    @_rpc
    def sign(self, seed: bytes, parts: Sequence[Part], *, nonce: int, era_blocks: int) -> Signed:
        signed = self._sign(seed, parts, nonce, era_blocks)
        self.signed.append(signed)
        return signed

    @_rpc
    def submit(self, extrinsic: str) -> None:
        self._enter(extrinsic)
        if not self.manual:
            self._build(empty=False)

    @_rpc
    def pending(self) -> set[str]:
        return set(self.pool)

    @_rpc
    def submit_many(self, extrinsics: Sequence[str]) -> list[Rejected | None]:
        """Into the pool together: one block (unless manual) for all that apply."""
        refused: list[Rejected | None] = []
        for extrinsic in extrinsics:
            try:
                self._enter(extrinsic)
                refused.append(None)
            except Rejected as rejected:
                refused.append(rejected)
        if not self.manual:
            self._build(empty=False)
        return refused

    def _enter(self, extrinsic: str) -> None:
        """Into the pool, or refused as the pool refuses it."""
        tx = decode(extrinsic)
        if tx.tx_hash in self.pool:
            return  # the same bytes: accepted once
        if tx.nonce < self.state.nonces.get(tx.signer, 0):
            raise Rejected("rejected: its nonce is spent", spent=True)
        if len(self.blocks) + 1 >= tx.valid_until:
            raise Rejected("rejected: invalid.ancientBirthBlock", dead=True)
        if self.state.spendable(tx.signer) < fee(len(tx.parts)):
            raise Rejected("rejected: the signer cannot pay the fee", dead=True)
        if any((o.signer, o.nonce) == (tx.signer, tx.nonce) for o in self.pool.values()):
            raise Rejected("rejected: Priority is too low")
        self.pool[tx.tx_hash] = tx

    @_rpc
    def head(self) -> Head:
        return Head(best=len(self.blocks), finalized=self._final())

    @_rpc
    def block_hash(self, number: int) -> str | None:
        if number == 0:
            return GENESIS
        return self.blocks[number - 1].hash if 0 < number <= len(self.blocks) else None

    @_rpc
    def find(self, tx_hashes: Sequence[str], *, first: int, last: int) -> dict[str, Inclusion]:
        wanted, found = set(tx_hashes), {}
        for block in self.blocks[max(first, 1) - 1 : max(last, 0)]:
            for index, applied in enumerate(block.extrinsics):
                if applied.tx.tx_hash in wanted:
                    found[applied.tx.tx_hash] = Inclusion(block.number, block.hash, index)
        return found

    @_rpc
    def outcome(self, inclusion: Inclusion, parts: Sequence[Part]) -> Outcome:
        number = inclusion.block_number
        if not 0 < number <= len(self.blocks) or self.blocks[number - 1].hash != (
            inclusion.block_hash
        ):
            raise ChainError(f"no block {inclusion.block_hash}")
        applied = self.blocks[number - 1].extrinsics[inclusion.index]
        assert tuple(parts) == applied.tx.parts, "read against other parts than it carries"
        return Outcome(applied.fee, applied.outcomes)

    # reads (of the best block, unless said)

    @_rpc
    def balance(self, account: bytes) -> Balance:
        return Balance(free=self.state.free.get(account, 0), frozen=0)

    @_rpc
    def account(self, account: bytes) -> Account:
        return Account(self.state.nonces.get(account, 0), self.state.free.get(account, 0))

    @_rpc
    def accounts(self, accounts: Sequence[bytes]) -> dict[bytes, Account]:
        return {
            key: Account(self.state.nonces.get(key, 0), self.state.free.get(key, 0))
            for key in accounts
        }

    @_rpc
    def deposits(self) -> Deposits:
        return DEPOSITS

    @_rpc
    def metadata_deposit(self, data: str) -> int:
        return metadata_deposit(data)

    @_rpc
    def create_collection_fee(self, admin: bytes, *, max_supply: int | None) -> int:
        return fee(1)

    @_rpc
    def collections_owned_by(self, account: bytes) -> list[int]:
        return sorted(i for i, c in self.state.collections.items() if c.owner == account)

    @_rpc
    def collection(self, collection_id: int) -> Collection | None:
        found = self.state.collections.get(collection_id)
        if found is None:
            return None
        return Collection(owner=found.owner, items=len(found.items), max_supply=found.max_supply)

    @_rpc
    def item_owner(self, collection_id: int, item_id: int) -> bytes | None:
        return self.state.owners.get((collection_id, item_id))

    @_rpc
    def item_metadata(self, collection_id: int, item_id: int) -> str | None:
        return self.state.metadata.get((collection_id, item_id))

    @_rpc
    def collection_items(self, collection_id: int) -> dict[int, ChainItem]:
        return self.state.items(collection_id)

    @_rpc
    def items(
        self, collection_id: int, item_ids: Sequence[int], *, final: bool = False
    ) -> dict[int, ChainItem]:
        return (self._state_at_final() if final else self.state).items(collection_id, item_ids)
