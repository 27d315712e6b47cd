"""The in-memory chain keeps the pallet rules, the pool's refusals, blocks and finality that the
handlers rely on (else the worker tests prove nothing)."""

import json
import os

import pytest

from tessera.chain.gateway import (
    ChainItem,
    ChainUnreachable,
    Collection,
    CreateCollection,
    Filler,
    Fund,
    Head,
    Inclusion,
    Mint,
    Outcome,
    PartOutcome,
    Rejected,
    Transfer,
)
from tests.jobs.memory_chain import DEPOSITS, DOT, FEE, Crash, MemoryChain, fee, signer_of
from tests.jobs.memory_pallets import metadata_deposit

META = "https://meta.example/ticket.json"


@pytest.fixture
def funded() -> tuple[MemoryChain, bytes, bytes]:
    """A chain and a funded seed with its public key."""
    chain, seed = MemoryChain(), os.urandom(32)
    chain.fund(signer_of(seed), 100 * DOT)
    return chain, seed, signer_of(seed)


def land(chain: MemoryChain, seed: bytes, *parts, nonce: int | None = None) -> Outcome:
    """Sign ``parts`` (with the signer's next nonce), submit them, and read their outcome."""
    if nonce is None:
        nonce = chain.account(signer_of(seed)).nonce
    signed = chain.sign(seed, parts, nonce=nonce, era_blocks=64)
    chain.submit(signed.extrinsic)
    found = chain.find([signed.tx_hash], first=signed.valid_from, last=chain.head().best)
    return chain.outcome(found[signed.tx_hash], parts)


class TestPallets:
    def test_parts_fail_alone_with_the_pallets_errors(self, funded):
        chain, seed, admin = funded
        [created] = land(chain, seed, CreateCollection(admin, 2)).parts
        assert created == PartOutcome(None, 0)
        holder = signer_of(os.urandom(32))
        outcome = land(
            chain,
            seed,
            Mint(0, 1, holder, META),
            Mint(0, 1, holder, None),  # again
            Mint(0, 7, None, META),  # metadata of an NFT that does not exist
            Mint(0, 2, holder, None),
            Mint(0, 3, holder, META),  # past the max supply
            Mint(9, 1, holder, None),
        )
        assert outcome == Outcome(
            fee(6),
            (
                PartOutcome(None),
                PartOutcome("Nfts.AlreadyExists"),
                PartOutcome("Nfts.UnknownItem"),
                PartOutcome(None),
                PartOutcome("Nfts.MaxSupplyReached"),
                PartOutcome("Nfts.UnknownCollection"),
            ),
        )
        assert chain.collection(0) == Collection(owner=admin, items=2, max_supply=2)
        assert chain.items(0, [1, 2, 3, 7]) == {
            1: ChainItem(holder, META),
            2: ChainItem(holder, None),
        }
        deposits = DEPOSITS.collection + 2 * DEPOSITS.item + metadata_deposit(META)
        assert chain.free[admin] == 100 * DOT - deposits - fee(1) - fee(6)
        assert chain.state.reserved[admin] == deposits
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]

    def test_a_part_the_owner_cannot_pay_the_deposits_of_is_reverted_whole(self, funded):
        chain, seed, admin = funded
        land(chain, seed, CreateCollection(admin, None))
        spare = DEPOSITS.item + metadata_deposit(META) - 1  # the mint, not its metadata
        chain.free[admin] = DEPOSITS.existential + fee(2) + spare
        outcome = land(chain, seed, Mint(0, 1, admin, None), Mint(0, 2, admin, META))
        assert outcome.parts == (PartOutcome(None), PartOutcome("Balances.InsufficientBalance"))
        assert (chain.owners, chain.metadata) == ({(0, 1): admin}, {})
        assert chain.free[admin] == DEPOSITS.existential + spare - DEPOSITS.item

    def test_only_the_issuer_mints_and_only_the_owner_transfers(self, funded):
        chain, seed, admin = funded
        holder, stranger = os.urandom(32), os.urandom(32)
        chain.fund(signer_of(stranger), DOT)
        land(chain, seed, CreateCollection(admin, None), Mint(0, 1, signer_of(holder), META))
        outcome = land(
            chain,
            stranger,
            Mint(0, 2, signer_of(stranger), None),
            Mint(0, 1, None, "https://elsewhere.example"),
            Transfer(0, 1, signer_of(stranger)),
            Transfer(0, 5, signer_of(stranger)),
        )
        assert [part.error for part in outcome.parts] == [
            "Nfts.NoPermission",
            "Nfts.NoPermission",
            "Nfts.NoPermission",
            "Nfts.UnknownItem",
        ]
        assert chain.items(0, [1, 2]) == {1: ChainItem(signer_of(holder), META)}
        chain.fund(signer_of(holder), DOT)
        assert land(chain, holder, Transfer(0, 1, admin)).parts == (PartOutcome(None),)
        assert chain.item_owner(0, 1) == admin

    def test_funds_are_sent_keeping_both_accounts_alive(self, funded):
        chain, seed, admin = funded
        dest = signer_of(os.urandom(32))
        outcome = land(
            chain,
            seed,
            Fund(dest, DOT),
            Fund(dest, 100 * DOT),  # more than it holds
            Fund(signer_of(os.urandom(32)), DEPOSITS.existential - 1),  # a new account too poor
            Fund(dest, 99 * DOT - fee(4) - DEPOSITS.existential + 1),  # would not keep it alive
        )
        assert [part.error for part in outcome.parts] == [
            None,
            "Token.FundsUnavailable",
            "Token.BelowMinimum",
            "Token.NotExpendable",
        ]
        assert (chain.free[admin], chain.free[dest]) == (99 * DOT - fee(4), DOT)


class TestPool:
    def test_refusals(self, funded):
        chain, seed, _ = funded
        spent = chain.sign(seed, [Filler()], nonce=0, era_blocks=64)
        chain.submit(spent.extrinsic)
        with pytest.raises(Rejected, match=r"^rejected: its nonce is spent$") as refused:
            chain.submit(spent.extrinsic)
        assert (refused.value.spent, refused.value.dead) == (True, False)

        body = json.loads(bytes.fromhex(spent.extrinsic.removeprefix("0x")))
        tampered = "0x" + json.dumps(body | {"nonce": 5}).encode().hex()  # not what was signed
        with pytest.raises(Rejected, match="badProof") as refused:
            chain.submit(tampered)
        assert refused.value.dead

        poor = os.urandom(32)
        chain.fund(signer_of(poor), DEPOSITS.existential + FEE - 1)
        with pytest.raises(Rejected, match=r"^rejected: the signer cannot pay the fee$") as refused:
            chain.submit(chain.sign(poor, [Filler()], nonce=0, era_blocks=4).extrinsic)
        assert refused.value.dead

        old = chain.sign(seed, [Filler()], nonce=1, era_blocks=4)
        assert (old.valid_from, old.valid_until) == (2, 5)
        for _ in range(3):
            chain.build()
        with pytest.raises(Rejected, match="ancientBirthBlock") as refused:
            chain.submit(old.extrinsic)
        assert refused.value.dead
        assert chain.calls == ["System.remark"] and chain.pool == {}

    def test_the_same_bytes_land_once_and_a_future_nonce_waits_for_the_gap(self, funded):
        chain, seed, admin = funded
        chain.manual = True
        first = chain.sign(seed, [Filler()], nonce=0, era_blocks=64)
        second = chain.sign(seed, [Fund(signer_of(os.urandom(32)), DOT)], nonce=1, era_blocks=64)
        other = chain.sign(seed, [Filler()], nonce=1, era_blocks=64)  # the same nonce
        assert first.tx_hash != chain.sign(seed, [Filler()], nonce=0, era_blocks=64).tx_hash
        chain.submit(second.extrinsic)
        chain.submit(second.extrinsic)
        with pytest.raises(Rejected, match="Priority is too low") as refused:
            chain.submit(other.extrinsic)
        assert not (refused.value.spent or refused.value.dead)
        assert chain.build().extrinsics == ()  # nonce 0 missing: nothing applies
        chain.submit(first.extrinsic)
        block = chain.build()
        assert [(x.tx.nonce, x.call) for x in block.extrinsics] == [
            (0, "System.remark"),
            (1, "Balances.transfer_keep_alive"),
        ]
        assert chain.account(admin).nonce == 2 and chain.pool == {}
        assert chain.find([first.tx_hash, second.tx_hash, other.tx_hash], first=1, last=2) == {
            first.tx_hash: Inclusion(2, block.hash, 0),
            second.tx_hash: Inclusion(2, block.hash, 1),
        }

    def test_extrinsics_submitted_together_share_a_block(self, funded):
        chain, seed, admin = funded
        other = os.urandom(32)
        chain.fund(signer_of(other), DOT)
        mine = chain.sign(seed, [Filler()], nonce=0, era_blocks=64)
        theirs = chain.sign(other, [Filler()], nonce=0, era_blocks=64)
        again = chain.sign(seed, [Filler()], nonce=0, era_blocks=64)  # the nonce of ``mine``
        refused = chain.submit_many([mine.extrinsic, theirs.extrinsic, again.extrinsic])
        assert [str(r) if r else None for r in refused] == [
            None,
            None,
            "rejected: Priority is too low",
        ]
        [block] = chain.blocks
        assert [(x.tx.signer, x.tx.tx_hash) for x in block.extrinsics] == [
            (admin, mine.tx_hash),
            (signer_of(other), theirs.tx_hash),
        ]

    def test_each_submit_builds_a_block_unless_manual(self, funded):
        chain, seed, _ = funded
        assert chain.head() == Head(0, 0) and chain.block_hash(1) is None
        land(chain, seed, Filler())
        land(chain, seed, Filler())
        assert [block.number for block in chain.blocks] == [1, 2]
        assert chain.head() == Head(2, 2)
        assert chain.block_hash(2) == chain.blocks[1].hash != chain.block_hash(1)

    def test_limits_and_weights_leave_room_for_ten_parts(self, funded):
        chain, _, admin = funded
        limits = chain.limits()
        one, two = chain.weigh(admin, [Filler()]), chain.weigh(admin, [Filler(), Filler()])
        per = two.ref_time - one.ref_time
        assert (limits.ref_time - (one.ref_time - per)) // per == 10
        assert (one.fee, two.fee) == (FEE, fee(2))


class TestFinality:
    def test_final_reads_and_a_reorg(self, funded):
        chain, seed, admin = funded
        land(chain, seed, CreateCollection(admin, None))
        chain.hold_finality()
        holder = signer_of(os.urandom(32))
        minted = chain.sign(seed, [Mint(0, 1, holder, META)], nonce=1, era_blocks=64)
        chain.submit(minted.extrinsic)
        dropped = chain.block_hash(2)
        assert chain.head() == Head(2, 1)
        assert chain.items(0, [1]) == {1: ChainItem(holder, META)}
        assert chain.items(0, [1], final=True) == {}
        with pytest.raises(AssertionError):
            chain.reorg(2)  # block 1 is final
        chain.reorg(1)
        assert (chain.head(), chain.block_hash(2), chain.items(0, [1])) == (Head(1, 1), None, {})
        assert chain.account(admin).nonce == 1 and chain.pool == {}
        chain.submit(minted.extrinsic)  # the same bytes land again, in another block 2
        assert chain.block_hash(2) not in (None, dropped)
        assert chain.head() == Head(2, 1)
        chain.release_finality()
        assert chain.head() == Head(2, 2)
        assert chain.items(0, [1], final=True) == {1: ChainItem(holder, META)}

    def test_a_finality_lag(self, funded):
        chain, seed, _ = funded
        chain.finality_lag = 2
        for _ in range(3):
            land(chain, seed, Filler())
        assert chain.head() == Head(3, 1)


class TestFaults:
    def test_unreachable_and_crashes(self, funded):
        chain, seed, admin = funded
        chain.unreachable = True
        with pytest.raises(ChainUnreachable, match="cannot reach ws://memory"):
            chain.deposits()
        chain.unreachable = False
        signed = chain.sign(seed, [CreateCollection(admin, None)], nonce=0, era_blocks=64)
        chain.crash_before = "submit"
        with pytest.raises(Crash):
            chain.submit(signed.extrinsic)
        assert (chain.collections, chain.pool, chain.blocks) == ({}, {}, [])
        chain.crash_after = "submit"
        with pytest.raises(Crash):
            chain.submit(signed.extrinsic)
        assert list(chain.collections) == [0] and chain.calls == ["Nfts.create"]
        chain.submit(chain.sign(seed, [Filler()], nonce=1, era_blocks=64).extrinsic)  # once
        assert chain.calls == ["Nfts.create", "System.remark"]

    def test_a_key_acting_outside_tessera(self, funded):
        chain, seed, admin = funded
        applied = chain.act(seed, CreateCollection(admin, 3))
        assert (applied.call, applied.outcomes) == ("Nfts.create", (PartOutcome(None, 0),))
        assert chain.account(admin).nonce == 1 and chain.signed == []
