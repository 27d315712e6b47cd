"""`tessera chain reconcile` against the real Asset Hub runtime: clean, drift made on chain with
the wallets' own keys, the repair queued by the command and carried out by the worker, clean
again."""

import uuid

import pytest
from sqlalchemy import select
from substrateinterface import Keypair, KeypairType

from tessera.chain.gateway import Mint, Transfer
from tessera.models import ProductItem
from tests import orm
from tests.chain.conftest import DOT, land
from tests.chain.test_nft import NFT, funded, get_product, nft_product, public_key
from tests.factories import create_users, issue_items
from tests.jobs.test_worker import seed_of
from tests.test_cli_reconcile import cli_env, reconcile, table_rows

pytestmark = pytest.mark.chain


async def test_drift_found_repaired_by_the_worker_and_clean_again(
    settings, chain_app, chain_client, tenant, devchain, worker, gateway, database
):
    env = cli_env(settings, chain_assethub_rpc_url=devchain.url, chain_timeout_seconds=30)
    project = str(tenant.project_id)
    wallet = await funded(chain_client, tenant, devchain)
    product = await nft_product(chain_client, tenant)
    ada, bob = await create_users(chain_client, tenant, 2)
    await issue_items(chain_client, tenant, product["id"], ada["id"], bob["id"])
    assert await worker.run_until_idle() == 2  # the collection, then its two mints at once
    collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"]["collection_id"]

    done = await reconcile(env, "--project", project)
    assert done.returncode == 0, done.stderr
    assert table_rows(done.stdout) == {product["id"]: ["2 | none"]}

    # On chain, outside Tessera: ada's NFT leaves for a wallet no user of the project holds
    # (with her custodial key), and the collection's admin (the project wallet) changes the
    # metadata of bob's.
    ada_key = public_key(ada["wallets"][0]["address"])
    devchain.fund(ada["wallets"][0]["address"], DOT)
    outsider = Keypair.create_from_uri(f"//{uuid.uuid4().hex}", crypto_type=KeypairType.SR25519)
    land(
        gateway,
        await seed_of(chain_app, ada_key),
        [Transfer(collection_id, 1, outsider.public_key)],
    )
    land(
        gateway,
        await seed_of(chain_app, public_key(wallet["address"])),
        [Mint(collection_id, 2, None, "https://elsewhere.example/nft.json")],
    )

    drifted = await reconcile(env, "--project", project)
    assert drifted.returncode == 1, drifted.stderr
    assert drifted.stderr == ""
    assert table_rows(drifted.stdout) == {
        product["id"]: ["2 | owner_mismatch: 1", "metadata_mismatch: 1"]
    }
    assert "2 finding(s) in 1 of 1 product(s)" in drifted.stdout

    repaired = await reconcile(env, "--project", project, "--product", product["id"], "--repair")
    assert repaired.returncode == 1, repaired.stderr  # queued: the worker has not run them
    assert table_rows(repaired.stdout) == {
        product["id"]: [
            "2 | owner_mismatch: 1 | mark_external: 1",
            "metadata_mismatch: 1 | set_metadata: 1",
        ]
    }
    assert await worker.run_until_idle() == 2  # nft.follow, nft.mint (its metadata again)
    assert gateway.item_metadata(collection_id, 2) == NFT["metadata_uri"]
    async with orm.session(database, write=False) as session:
        first = await session.scalar(
            select(ProductItem).where(
                ProductItem.product_id == uuid.UUID(product["id"]), ProductItem.item_id == 1
            )
        )
    assert (first.nft_status, first.nft_held_by) == ("external", outsider.public_key.hex())

    clean = await reconcile(env, "--project", project)
    assert clean.returncode == 0, clean.stderr
    assert table_rows(clean.stdout) == {product["id"]: ["2 | none"]}
