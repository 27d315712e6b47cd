"""The in-memory chain keeps the pallet rules the handlers rely on (else the worker tests prove
nothing)."""

import os

import pytest

from tessera.chain.gateway import ChainError, ChainUnreachable
from tests.jobs.memory_chain import DEPOSITS, DOT, FEE, Crash, MemoryChain, signer_of


@pytest.fixture
def funded() -> tuple[MemoryChain, bytes, bytes]:
    """A chain and a funded seed with its public key."""
    chain, seed = MemoryChain(), os.urandom(32)
    chain.fund(signer_of(seed), 100 * DOT)
    return chain, seed, signer_of(seed)


class TestMemoryChain:
    def test_a_signer_that_cannot_pay_the_fee_is_refused(self):
        chain, seed = MemoryChain(), os.urandom(32)
        chain.fund(signer_of(seed), FEE - 1)
        with pytest.raises(ChainError, match=r"^Nfts.create: rejected: the signer cannot pay"):
            chain.create_collection(seed, max_supply=None)
        assert chain.free[signer_of(seed)] == FEE - 1 and chain.calls == []

    def test_mint_into_a_full_collection_or_onto_an_item_fails(self, funded):
        chain, seed, admin = funded
        collection_id, _ = chain.create_collection(seed, max_supply=1)
        chain.mint(seed, collection_id=collection_id, item_id=1, owner=admin)
        with pytest.raises(ChainError, match=r"^Nfts.mint: AlreadyExists$"):
            chain.mint(seed, collection_id=collection_id, item_id=1, owner=admin)
        with pytest.raises(ChainError, match=r"^Nfts.mint: MaxSupplyReached$"):
            chain.mint(seed, collection_id=collection_id, item_id=2, owner=admin)
        assert chain.collection(collection_id).items == 1
        assert chain.free[admin] == 100 * DOT - DEPOSITS.collection - DEPOSITS.item - 4 * FEE

    def test_only_the_owner_transfers(self, funded):
        chain, seed, admin = funded
        holder, stranger = os.urandom(32), os.urandom(32)
        chain.fund(signer_of(stranger), DOT)
        collection_id, _ = chain.create_collection(seed, max_supply=None)
        chain.mint(seed, collection_id=collection_id, item_id=1, owner=signer_of(holder))
        with pytest.raises(ChainError, match=r"^Nfts.transfer: NoPermission$"):
            chain.transfer(stranger, collection_id=collection_id, item_id=1, dest=admin)
        assert chain.item_owner(collection_id, 1) == signer_of(holder)

    def test_send_moves_balance_and_each_call_has_a_later_block(self, funded):
        chain, seed, admin = funded
        dest = signer_of(os.urandom(32))
        first = chain.send(seed, dest=dest, amount=DOT)
        second = chain.send(seed, dest=dest, amount=DOT)
        assert (chain.free[admin], chain.free[dest]) == (98 * DOT - 2 * FEE, 2 * DOT)
        assert second.block_number == first.block_number + 1
        assert second.tx_hash != first.tx_hash
        with pytest.raises(ChainError, match=r"InsufficientBalance$"):
            chain.send(seed, dest=dest, amount=chain.free[admin])  # would not keep it alive

    def test_unreachable_and_crash_after_a_submit(self, funded):
        chain, seed, _ = funded
        chain.unreachable = True
        with pytest.raises(ChainUnreachable):
            chain.deposits()
        chain.unreachable, chain.crash_after = False, "create_collection"
        with pytest.raises(Crash):
            chain.create_collection(seed, max_supply=None)
        assert list(chain.collections) == [0] and chain.calls == ["Nfts.create"]
