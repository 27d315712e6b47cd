"""The dev chain's funding (``tessera devchain`` keeps project wallets funded): a balance set
or topped up keeps the rest of the account, its nonce and the deposits it holds, as a wallet
in the middle of a day of mints needs."""

import pytest
import sr25519

from tessera.chain.keys import ss58_address

pytestmark = pytest.mark.chain

DOT = 10**10


def _read(devchain, address: str) -> dict:
    from substrateinterface import SubstrateInterface

    substrate = SubstrateInterface(url=devchain.url)
    try:
        return dict(substrate.query("System", "Account", [address]).value)
    finally:
        substrate.close()


def test_a_top_up_keeps_the_nonce_and_the_deposits(devchain):
    address = ss58_address(bytes(sr25519.pair_from_seed(bytes(range(32)))[0]), 42)
    devchain.rpc(
        "dev_setStorage",
        [
            {
                "System": {
                    "Account": [
                        [
                            [address],
                            {
                                "nonce": 7,
                                "providers": 1,
                                "data": {"free": str(40 * DOT), "reserved": str(3 * DOT)},
                            },
                        ]
                    ]
                }
            }
        ],
    )
    assert devchain.free(address) == 40 * DOT
    assert devchain.keep_funded(address, 100 * DOT)  # 40 is below half of 100
    after = _read(devchain, address)
    assert after["nonce"] == 7
    assert after["data"]["free"] == 100 * DOT and after["data"]["reserved"] == 3 * DOT
    assert not devchain.keep_funded(address, 150 * DOT)  # 100 is not below 75
    assert devchain.free(address) == 100 * DOT


def test_a_new_account_is_funded(devchain):
    address = ss58_address(bytes(sr25519.pair_from_seed(bytes([9] * 32))[0]), 42)
    assert devchain.free(address) == 0
    assert devchain.keep_funded(address, 5000 * DOT)
    assert devchain.free(address) == 5000 * DOT
    assert _read(devchain, address)["nonce"] == 0
