"""An RPC URL may carry a provider's key: errors name the chain's host, never the whole URL."""

import pytest

from tessera.chain.gateway import ChainUnreachable
from tessera.chain.substrate import SubstrateGateway


def test_an_unreachable_chain_is_named_without_its_path_or_query():
    gateway = SubstrateGateway("ws://127.0.0.1:9/v3/provider-key-1234?apikey=abcd", timeout=2)
    with pytest.raises(ChainUnreachable) as raised:
        gateway.deposits()
    message = str(raised.value)
    assert message.startswith("cannot reach ws://127.0.0.1:9: ")
    assert "provider-key-1234" not in message and "abcd" not in message
