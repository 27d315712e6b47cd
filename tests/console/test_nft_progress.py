"""Where an NFT product's items stand, on its console page: their mints by status, the queued
ones that wait for the project wallet to be funded (with a reason), and their transfers on
chain in flight; the items as the job worker leaves them (``tessera.nfts.repository``)."""

import re
import uuid

from tessera.jobs.queue import FUNDS
from tessera.models.base import utcnow
from tessera.nfts import repository as nfts
from tests.console.test_products import METADATA, fund, product_page, text_of
from tests.factories import create_product, create_users, issue_items

MINTS_REASON = (
    f"{FUNDS}: the project wallet 5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY holds "
    "0.1 WND on WestendAssetHub; minting 2 NFTs needs about 0.45 WND; 2 wait until it is funded"
)
TRANSFERS_REASON = (
    f"{FUNDS}: the project wallet 5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY holds "
    "0.1 WND on WestendAssetHub; sending 1 holders the fees of their transfers needs 0.2 WND"
)


def progress_of(html: str) -> dict[str, str]:
    """The figures of the page's NFT block."""
    block = html.split('<dl class="figures nft-progress">')[1].split("</dl>")[0]
    return {text_of(k): text_of(v) for k, v in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", block)}


def warnings_of(html: str) -> list[str]:
    return [text_of(p) for p in re.findall(r'<p class="warning funds">(.*?)</p>', html, re.S)]


async def nft_product(client, tenant, chain, items: int) -> tuple[dict, list[uuid.UUID]]:
    """An NFT product with ``items`` items issued (their mints queued), and their ids."""
    await fund(client, tenant, chain)
    product = await create_product(
        client, tenant, mint_nft=True, chain="WestendAssetHub", metadata_uri=METADATA
    )
    if not items:
        return product, []
    users = await create_users(client, tenant, items)
    issued = await issue_items(client, tenant, product["id"], *(u["id"] for u in users))
    return product, [uuid.UUID(item["id"]) for item in issued]


class TestNftProgress:
    async def test_mints_by_status_those_waiting_for_funds_and_transfers_in_flight(
        self, owner, client, database, tenant, chain
    ):
        product, ids = await nft_product(client, tenant, chain, 9)
        minted, submitted, waiting, queued, failed, external = (
            ids[0:3], ids[3:4], ids[4:6], ids[6:7], ids[7:8], ids[8:9]
        )  # fmt: skip
        now = utcnow()
        async with database.transaction() as tx:  # as the worker leaves them
            await nfts.write_items(
                tx,
                [{"id": i, "nft_status": "minted", "nft_reason": None} for i in minted]
                + [
                    {"id": failed[0], "nft_status": "failed", "nft_reason": MINTS_REASON},
                    {"id": external[0], "nft_status": "external", "nft_reason": None},
                ],
            )
            await nfts.mark_submitted(tx, submitted, uuid.uuid4(), "0x" + "1" * 64, now)
            await nfts.mark_waiting(tx, waiting, MINTS_REASON, now)
            await nfts.mark_waiting(
                tx, queued, "the product's NFT collection is not created yet", now
            )
            # The minted items' transfers on chain: one in flight, two queued, one of them
            # waiting for funds.
            await nfts.mark_submitted(
                tx, minted[:1], uuid.uuid4(), "0x" + "2" * 64, now, transfer=True
            )
            await nfts.mark_waiting(tx, minted[1:2], TRANSFERS_REASON, now, transfer=True)
            await nfts.mark_waiting(tx, minted[2:3], None, now, transfer=True)
            await tx.commit()

        shown = await owner.get(product_page(tenant, product["id"]))
        assert shown.status_code == 200
        assert progress_of(shown.text) == {
            "Minted": "3",
            "Submitted": "1",
            "Queued": "3",
            "Failed": "1",
            "External": "1",
            "Transfers in flight": "1",
            "Transfers queued": "2",
        }
        assert warnings_of(shown.text) == [
            f"2 queued mints wait for funds: {MINTS_REASON}",
            f"1 queued transfer waits for funds: {TRANSFERS_REASON}",
        ]

    async def test_freshly_issued_items_are_queued_and_nothing_waits(
        self, owner, client, tenant, chain
    ):
        product, _ = await nft_product(client, tenant, chain, 2)
        shown = await owner.get(product_page(tenant, product["id"]))
        # Failed and external ones, and queued transfers, are shown only when there are some.
        assert progress_of(shown.text) == {
            "Minted": "0",
            "Submitted": "0",
            "Queued": "2",
            "Transfers in flight": "0",
        }
        assert warnings_of(shown.text) == []

    async def test_an_operator_sees_it_too_and_an_nft_product_without_items_shows_zeros(
        self, operator, client, tenant, chain
    ):
        product, _ = await nft_product(client, tenant, chain, 0)
        shown = await operator.get(product_page(tenant, product["id"]))
        assert progress_of(shown.text) == {
            "Minted": "0",
            "Submitted": "0",
            "Queued": "0",
            "Transfers in flight": "0",
        }

    async def test_a_product_without_nfts_has_no_such_block(self, owner, client, tenant):
        product = await create_product(client, tenant)
        shown = await owner.get(product_page(tenant, product["id"]))
        assert shown.status_code == 200
        assert "NFTs of the items" not in shown.text and "nft-progress" not in shown.text

    async def test_only_the_products_own_items_count(
        self, owner, client, database, tenant, other, chain
    ):
        mine, _ = await nft_product(client, tenant, chain, 1)
        # Another product of the project, and another project's, both waiting for funds.
        elsewhere, [same_project] = await nft_product(client, tenant, chain, 1)
        _, [other_project] = await nft_product(client, other, chain, 1)
        async with database.transaction() as tx:
            await nfts.mark_waiting(tx, [same_project, other_project], MINTS_REASON, utcnow())
            await tx.commit()
        shown = await owner.get(product_page(tenant, mine["id"]))
        assert progress_of(shown.text)["Queued"] == "1"
        assert warnings_of(shown.text) == []
        shown = await owner.get(product_page(tenant, elsewhere["id"]))
        assert warnings_of(shown.text) == [f"1 queued mint waits for funds: {MINTS_REASON}"]
