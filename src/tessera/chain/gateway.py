"""What Tessera needs from a chain: one protocol, one real adapter (``substrate.SubstrateGateway``).

Accounts are passed and returned as 32-byte public keys: the runtime encodes addresses with its
own SS58 prefix, which need not be the prefix configured for the chain. Calls are blocking
(substrate-interface); async code runs them in a thread.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class ChainError(Exception):
    """A call the chain refused (module error) or could not answer."""


class ChainUnreachable(ChainError):
    pass


# A storage map (a collection's NFTs) is read by prefix this many entries per round trip.
PAGE_SIZE = 1000


@dataclass(frozen=True, slots=True)
class TxResult:
    tx_hash: str
    block_hash: str
    block_number: int


@dataclass(frozen=True, slots=True)
class Collection:
    owner: bytes
    items: int
    max_supply: int | None


@dataclass(frozen=True, slots=True)
class ChainItem:
    """An NFT as the chain holds it: its owner and its metadata (None when it has none)."""

    owner: bytes
    metadata: str | None


@dataclass(frozen=True, slots=True)
class Deposits:
    collection: int
    item: int
    existential: int


@dataclass(frozen=True, slots=True)
class Balance:
    free: int
    frozen: int


@dataclass(frozen=True, slots=True)
class Account:
    """An account as the chain's state has it: the nonce of its next transaction (the ones
    waiting in a pool not counted) and its free balance."""

    nonce: int
    free: int


@dataclass(frozen=True, slots=True)
class Head:
    best: int
    finalized: int


# The parts of an extrinsic. Each part is atomic (its calls in a ``Utility.batch_all``); the
# extrinsic is a ``Utility.force_batch`` of its parts, so one part that fails (an NFT that
# exists already, a deposit the signer cannot pay) fails alone, with its own error, and the
# others land. An extrinsic of one part of one call is sent as that call.


@dataclass(frozen=True, slots=True)
class Mint:
    """An NFT minted to ``owner`` with its metadata. ``owner`` None: the metadata alone (the
    NFT exists); ``metadata`` None: the mint alone."""

    collection_id: int
    item_id: int
    owner: bytes | None
    metadata: str | None


@dataclass(frozen=True, slots=True)
class Transfer:
    collection_id: int
    item_id: int
    dest: bytes


@dataclass(frozen=True, slots=True)
class Fund:
    """Native tokens sent, keeping the sender alive (``Balances.transfer_keep_alive``)."""

    dest: bytes
    amount: int


@dataclass(frozen=True, slots=True)
class CreateCollection:
    """A collection that only its issuer (the signer) mints into, with the signer as admin."""

    admin: bytes
    max_supply: int | None


@dataclass(frozen=True, slots=True)
class Filler:
    """Spends a nonce and nothing else (``System.remark``): fills a nonce whose extrinsic can no
    longer land, so that the signer's later ones can."""


Part = Mint | Transfer | Fund | CreateCollection | Filler


@dataclass(frozen=True, slots=True)
class Weight:
    """What an extrinsic costs the block and its signer, as the runtime reports it before it is
    signed: ref time (ps), proof size and length (bytes), and the fee (planck)."""

    ref_time: int
    proof_size: int
    length: int
    fee: int


@dataclass(frozen=True, slots=True)
class BlockLimits:
    """What one extrinsic of the normal class may use (``System.BlockWeights``,
    ``System.BlockLength``): the class's budget for one extrinsic, its base weight taken off."""

    ref_time: int
    proof_size: int
    length: int
    # The normal class's whole share of a block, which other traffic shares.
    total_ref_time: int
    total_proof_size: int


@dataclass(frozen=True, slots=True)
class Signed:
    """A signed extrinsic (hex), the signer's nonce it spends and its hash. It is mortal: it can
    land in blocks ``valid_from`` to ``valid_until - 1`` only. Submitted again, the same bytes
    land at most once."""

    extrinsic: str
    nonce: int
    tx_hash: str
    valid_from: int
    valid_until: int


@dataclass(frozen=True, slots=True)
class Inclusion:
    """Where an extrinsic landed: its block and its index in the block."""

    block_number: int
    block_hash: str
    index: int


@dataclass(frozen=True, slots=True)
class PartOutcome:
    """A part's fate in a landed extrinsic: None, or the pallet's error (``Nfts.AlreadyExists``);
    for a collection's creation, the collection's id."""

    error: str | None
    collection_id: int | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    fee: int
    parts: tuple[PartOutcome, ...]


class Rejected(ChainError):
    """The transaction pool refused an extrinsic. ``spent``: its nonce is spent already (it, or
    another extrinsic of that nonce, landed); ``dead``: these bytes can never land (their era
    has passed, the signer cannot pay, the call exhausts a block); neither: try again later."""

    def __init__(self, message: str, *, spent: bool = False, dead: bool = False) -> None:
        super().__init__(message)
        self.spent = spent
        self.dead = dead


class ChainGateway(Protocol):
    def balance(self, account: bytes) -> Balance: ...

    def account(self, account: bytes) -> Account: ...

    def accounts(self, accounts: Sequence[bytes]) -> dict[bytes, Account]:
        """Several accounts in a few round trips (an account the chain does not know: nonce 0,
        nothing free)."""
        ...

    def deposits(self) -> Deposits: ...

    def metadata_deposit(self, data: str) -> int:
        """The deposit an NFT's metadata of ``data`` reserves from the collection's owner."""
        ...

    def create_collection_fee(self, admin: bytes, *, max_supply: int | None) -> int: ...

    def collections_owned_by(self, account: bytes) -> list[int]: ...

    def collection(self, collection_id: int) -> Collection | None: ...

    def item_owner(self, collection_id: int, item_id: int) -> bytes | None: ...

    def item_metadata(self, collection_id: int, item_id: int) -> str | None: ...

    def collection_items(self, collection_id: int) -> dict[int, ChainItem]:
        """Every NFT of the collection by its id, read by storage prefix in pages."""
        ...

    def items(
        self, collection_id: int, item_ids: Sequence[int], *, final: bool = False
    ) -> dict[int, ChainItem]:
        """Those of the NFTs that exist, as the best block has them (``final``: the last
        finalized block), in a few round trips whatever their number."""
        ...

    # Extrinsics: weighed, signed with a nonce the caller chooses, submitted without waiting,
    # then found in the blocks.

    def limits(self) -> BlockLimits: ...

    def weigh(self, signer: bytes, parts: Sequence[Part]) -> Weight: ...

    def sign(
        self, seed: bytes, parts: Sequence[Part], *, nonce: int, era_blocks: int
    ) -> Signed: ...

    def submit(self, extrinsic: str) -> None:
        """Hand the extrinsic to the transaction pool (``Rejected`` when it refuses it); the
        same bytes again are accepted, or refused as spent once they landed."""
        ...

    def submit_many(self, extrinsics: Sequence[str]) -> list[Rejected | None]:
        """Hand several extrinsics to the pool at once (their validations overlap); for each,
        None when the pool took it, else why it refused it."""
        ...

    def pending(self) -> set[str]:
        """The hashes of the extrinsics waiting in the node's pool."""
        ...

    def head(self) -> Head: ...

    def block_hash(self, number: int) -> str | None:
        """The hash of the block of that number on the best chain, None past its head."""
        ...

    def find(self, tx_hashes: Sequence[str], *, first: int, last: int) -> dict[str, Inclusion]:
        """Which of the extrinsics (by hash) landed in the best chain's blocks ``first`` to
        ``last``, and where."""
        ...

    def outcome(self, inclusion: Inclusion, parts: Sequence[Part]) -> Outcome:
        """The fee paid and each part's fate, from the block's events of that extrinsic."""
        ...
