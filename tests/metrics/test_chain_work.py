"""GET /metrics: the chain work as the workers record it, read from the database at each scrape:
extrinsics signed and NFTs per extrinsic by chain and call, the time from an item's issue to its
NFT in a final block (``metric_counts``), the extrinsics in flight by signer (the ledger) and the
jobs waiting for funds (the job table)."""

import uuid

from prometheus_client.parser import text_string_to_metric_families

from tessera.extrinsics import repository as ledger
from tessera.instruments import counts
from tessera.instruments.counts import MINT_SECONDS, PARTS
from tessera.jobs.queue import FUNDS
from tessera.metrics import service
from tessera.models import JobStatus
from tessera.models.base import utcnow
from tests.metrics.test_metrics import add_job, labels, samples, scrape

WESTEND = "WestendAssetHub"  # SS58 prefix 42 in the tests' settings
ASSET_HUB = "AssetHub"  # prefix 0
# Alice's and Bob's well-known public keys, and their addresses with each prefix.
ALICE = "d43593c715fdd31c61141abd04a99fd6822c8558854ccde39a5684e7a56da27d"
BOB = "8eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a48"
ALICE_42 = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
ALICE_0 = "15oF4uVJwmo4TdGW7VfQxNLavjCXviqxT9S1MgbjMNHr6Sp5"
BOB_42 = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"
NEW_FAMILIES = {
    "tessera_chain_extrinsics_submitted": "counter",
    "tessera_chain_nfts_per_extrinsic": "histogram",
    "tessera_nft_mint_seconds": "histogram",
    "tessera_chain_extrinsics_in_flight": "gauge",
    "tessera_jobs_waiting_for_funds": "gauge",
}


async def add(database, rows: list[dict]) -> None:
    """Counts added in a transaction of their own, as a worker adds them."""
    async with database.transaction() as tx:
        await counts.add_counts(tx, rows)
        await tx.commit()


def signed(chain: str, call: str, parts: int) -> list[dict]:
    """What the ledger counts when it records an extrinsic (``tessera.extrinsics.service``)."""
    series = {"chain": chain, "call": call}
    return [
        counts.counter("tessera_chain_extrinsics_submitted_total", series),
        *counts.observe("tessera_chain_nfts_per_extrinsic", series, parts, PARTS),
    ]


def buckets(text: str, name: str, **series: str) -> dict[str, float]:
    """A histogram series' cumulative buckets, by ``le``."""
    return {
        dict(key)["le"]: value
        for key, value in samples(text, f"{name}_bucket").items()
        if {k: v for k, v in key if k != "le"} == series
    }


class TestFamilies:
    async def test_each_is_there_with_its_help_before_anything_is_counted(self, client):
        text = await scrape(client)
        shown = {f.name: f for f in text_string_to_metric_families(text)}
        assert {name: shown[name].type for name in NEW_FAMILIES} == NEW_FAMILIES
        assert all(shown[name].samples == [] for name in NEW_FAMILIES)
        assert shown["tessera_nft_mint_seconds"].documentation == (
            "Seconds from an item's issue to its NFT in a final block, by chain."
        )
        assert shown["tessera_chain_extrinsics_in_flight"].documentation == (
            "Extrinsics signed and not yet final or dropped (each holds a nonce of its signer), "
            "by chain and signing account (its SS58 address)."
        )
        assert "# TYPE tessera_chain_extrinsics_submitted_total counter" in text


class TestCounted:
    async def test_extrinsics_signed_and_their_parts_by_chain_and_call(self, client, database):
        await add(database, signed(WESTEND, "Nfts.mint", 120))
        await add(database, signed(WESTEND, "Nfts.mint", 3))
        await add(database, signed(WESTEND, "Nfts.transfer", 1))
        await add(database, signed(ASSET_HUB, "Nfts.create", 1))

        text = await scrape(client)
        assert samples(text, "tessera_chain_extrinsics_submitted_total") == {
            labels(chain=WESTEND, call="Nfts.mint"): 2,
            labels(chain=WESTEND, call="Nfts.transfer"): 1,
            labels(chain=ASSET_HUB, call="Nfts.create"): 1,
        }
        name = "tessera_chain_nfts_per_extrinsic"
        assert buckets(text, name, chain=WESTEND, call="Nfts.mint") == {
            "1": 0, "5": 1, "10": 1, "25": 1, "50": 1, "100": 1, "200": 2, "300": 2, "400": 2,
            "500": 2, "1000": 2, "+Inf": 2,
        }  # fmt: skip
        assert buckets(text, name, chain=WESTEND, call="Nfts.transfer") == {
            le: 1 for le in ("1", "5", "10", "25", "50", "100", "200", "300", "400", "500", "1000")
        } | {"+Inf": 1}
        assert samples(text, f"{name}_sum") == {
            labels(chain=WESTEND, call="Nfts.mint"): 123,
            labels(chain=WESTEND, call="Nfts.transfer"): 1,
            labels(chain=ASSET_HUB, call="Nfts.create"): 1,
        }
        assert samples(text, f"{name}_count") == {
            labels(chain=WESTEND, call="Nfts.mint"): 2,
            labels(chain=WESTEND, call="Nfts.transfer"): 1,
            labels(chain=ASSET_HUB, call="Nfts.create"): 1,
        }

    async def test_mint_seconds_by_chain(self, client, database):
        name = "tessera_nft_mint_seconds"
        await add(
            database,
            counts.observe_many(name, {"chain": WESTEND}, [0.5, 4, 4.5, 45], MINT_SECONDS),
        )
        # Another batch, later: past the last bound, and on the boundary of one.
        await add(
            database,
            counts.observe_many(name, {"chain": WESTEND}, [100000, 60], MINT_SECONDS),
        )

        text = await scrape(client)
        assert buckets(text, name, chain=WESTEND) == {
            "1": 1, "2": 1, "5": 3, "10": 3, "20": 3, "30": 3, "60": 5, "120": 5, "300": 5,
            "600": 5, "1800": 5, "3600": 5, "21600": 5, "86400": 5, "+Inf": 6,
        }  # fmt: skip
        assert samples(text, f"{name}_sum") == {labels(chain=WESTEND): 100114.0}
        assert samples(text, f"{name}_count") == {labels(chain=WESTEND): 6}
        line = 'tessera_nft_mint_seconds_bucket{chain="WestendAssetHub",le="+Inf"} 6.0'
        assert line in text.splitlines()


async def add_extrinsic(database, project_id, chain: str, signer: str, nonce: int) -> uuid.UUID:
    """An extrinsic as the ledger records it before it is submitted: signed."""
    async with database.transaction() as tx:
        row = await ledger.add_extrinsic(
            tx,
            {
                "project_id": project_id,
                "chain": chain,
                "signer": signer,
                "nonce": nonce,
                "call": "Nfts.mint",
                "parts": 1,
                "body": [],
                "cost": 10**9,
                "data": "0x00",
                "tx_hash": f"0x{nonce:064x}",
                "valid_from": 100,
                "valid_until": 164,
            },
        )
        await tx.commit()
    return row.id


async def move(database, extrinsic_id: uuid.UUID, *to: str) -> None:
    now = utcnow()
    async with database.transaction() as tx:
        for status in to:
            if status == "submitted":
                await ledger.mark_submitted(tx, extrinsic_id, now)
            elif status == "included":
                await ledger.mark_included(tx, extrinsic_id, (120, "0x" + "ab" * 32, 1), now)
            elif status == "final":
                await ledger.mark_final(tx, extrinsic_id, (120, "0x" + "ab" * 32, 1), 5, now)
            else:
                await ledger.mark_dropped(tx, [extrinsic_id], "its era passed", now)
        await tx.commit()


class TestInFlight:
    async def test_signed_and_not_yet_final_or_dropped_by_signer_address(
        self, client, database, tenant, other
    ):
        project = tenant.project_id
        await add_extrinsic(database, project, WESTEND, ALICE, 0)  # signed
        await move(database, await add_extrinsic(database, project, WESTEND, ALICE, 1), "submitted")
        included = await add_extrinsic(database, project, WESTEND, ALICE, 2)
        await move(database, included, "submitted", "included")
        final = await add_extrinsic(database, project, WESTEND, ALICE, 3)
        await move(database, final, "submitted", "included", "final")
        await move(database, await add_extrinsic(database, project, WESTEND, ALICE, 4), "dropped")
        # Another signer (of another project), and Alice's key on the other chain.
        await move(
            database, await add_extrinsic(database, other.project_id, WESTEND, BOB, 0), "submitted"
        )
        await add_extrinsic(database, project, ASSET_HUB, ALICE, 0)
        await add_extrinsic(database, project, "NoSuchChain", ALICE, 0)  # a chain no longer known

        text = await scrape(client)
        assert samples(text, "tessera_chain_extrinsics_in_flight") == {
            labels(chain=WESTEND, signer=ALICE_42): 3,
            labels(chain=WESTEND, signer=BOB_42): 1,
            labels(chain=ASSET_HUB, signer=ALICE_0): 1,
        }

        # The included one is final now: Alice has one fewer in flight.
        await move(database, included, "final")
        text = await scrape(client)
        assert samples(text, "tessera_chain_extrinsics_in_flight") == {
            labels(chain=WESTEND, signer=ALICE_42): 2,
            labels(chain=WESTEND, signer=BOB_42): 1,
            labels(chain=ASSET_HUB, signer=ALICE_0): 1,
        }


def funds_reason() -> str:
    """A job's last word while its project wallet cannot pay, as the worker writes it."""
    return f"waiting: {FUNDS}: the project wallet holds 0.1 WND on WestendAssetHub"


class TestWaitingForFunds:
    async def test_queued_jobs_waiting_for_funds_by_kind_and_project(
        self, client, database, tenant, other
    ):
        mine, theirs = tenant.project_id, other.project_id
        for _ in range(2):
            await add_job(database, mine, "nft.mint", JobStatus.QUEUED, last_error=funds_reason())
        await add_job(database, mine, "nft.transfer", JobStatus.QUEUED, last_error=funds_reason())
        await add_job(database, theirs, "nft.mint", JobStatus.QUEUED, last_error=funds_reason())
        # Not waiting for funds: another reason to wait, an error, none, or not queued.
        for status, last_error in [
            (JobStatus.QUEUED, "waiting: the product's NFT collection is not created yet"),
            (JobStatus.QUEUED, "ChainUnavailable: the node did not answer"),
            (JobStatus.QUEUED, None),
            (JobStatus.RUNNING, funds_reason()),
            (JobStatus.FAILED, funds_reason()),
            (JobStatus.SUCCEEDED, None),
        ]:
            await add_job(database, mine, "nft.mint", status, last_error=last_error)

        text = await scrape(client)
        assert samples(text, "tessera_jobs_waiting_for_funds") == {
            labels(kind="nft.mint", project_id=str(mine)): 2,
            labels(kind="nft.transfer", project_id=str(mine)): 1,
            labels(kind="nft.mint", project_id=str(theirs)): 1,
        }


class TestStatements:
    async def test_a_scrape_reads_with_the_same_statements_however_many_rows(
        self, app, database, tenant, other, monkeypatch
    ):
        from tessera.db.rows import Rows

        fetched: list[str] = []
        fetch = Rows._fetch

        async def counted(self, statement, params):
            fetched.append(str(statement))
            return await fetch(self, statement, params)

        monkeypatch.setattr(Rows, "_fetch", counted)
        await service.scrape(database, app.state.settings)
        empty = len(fetched)

        for nonce, signer in enumerate([ALICE, BOB] * 3):
            await add_extrinsic(database, tenant.project_id, WESTEND, signer, nonce)
        for project in (tenant.project_id, other.project_id):
            await add_job(
                database, project, "nft.mint", JobStatus.QUEUED, last_error=funds_reason()
            )
        await add(database, signed(WESTEND, "Nfts.mint", 7) + signed(ASSET_HUB, "Nfts.mint", 7))
        fetched.clear()
        await service.scrape(database, app.state.settings)
        # The job queue, balances, deliveries, endpoints, findings, mails, counts, in flight,
        # waiting for funds: one statement each.
        assert empty == len(fetched) == 9
