"""A restored custodial key signs: a user's NFT, minted before a backup, is transferred on the
real Asset Hub runtime by a Tessera serving the restored database, signed with the user's key as
the backup kept it (tessera.backup; the rest of backups: tests/backup/)."""

import httpx
import pytest

from tessera.backup import service
from tessera.jobs.worker import JobContext
from tessera.main import create_app, make_worker
from tests.backup.databases import empty_database
from tests.chain.test_nft import funded, get_product, nft_product, public_key
from tests.conftest import BACKEND
from tests.factories import create_users, issue_items, transfer_item

# pg_dump and pg_restore need PostgreSQL itself (tests/backup/test_backup.py).
pytestmark = [pytest.mark.chain, pytest.mark.direct_postgresql]


async def test_a_restored_users_nft_transfers_signed_with_the_restored_key(
    chain_app, chain_client, tenant, devchain, database, worker, gateway, tmp_path
):
    await funded(chain_client, tenant, devchain)
    product = await nft_product(chain_client, tenant, is_transferable=True)
    ada, bob = await create_users(chain_client, tenant, 2)
    [item] = await issue_items(chain_client, tenant, product["id"], ada["id"])
    await worker.run_until_idle()
    collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"]["collection_id"]
    assert gateway.item_owner(collection_id, 1) == public_key(ada["wallets"][0]["address"])

    await service.create(database, tmp_path / "backup")
    url = await empty_database(BACKEND, tmp_path, "backup_chain")
    state = chain_app.state
    await service.restore(state.box, url, tmp_path / "backup")

    restored = create_app(state.settings.model_copy(update={"database_url": url}))
    async with restored.router.lifespan_context(restored):
        transport = httpx.ASGITransport(app=restored)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            moved = await transfer_item(client, tenant, product["id"], item["id"], ada, bob)
            assert moved.status_code == 200, moved.text
        context = JobContext(restored.state.database, restored.state.box, restored.state.chains)
        assert await make_worker(context, restored.state.settings).run_until_idle() == 1
    assert gateway.item_owner(collection_id, 1) == public_key(bob["wallets"][0]["address"])
