"""A product's reconciliation with the chain on its console page: the last check and its
findings, "Check now", and the repair's dry run then its confirmation, against the in-memory
chain changed behind Tessera's back (an NFT burnt, its metadata rewritten, NFTs moved, one
minted outside Tessera)."""

import html
import re
import uuid
from dataclasses import dataclass

import pytest
from sqlalchemy import select

from tessera.chain.keys import ss58_address
from tessera.jobs.queue import JobKind
from tessera.models import Job, Reconciliation
from tests import orm
from tests.console.test_products import (
    METADATA,
    api_items,
    fund,
    notice_of,
    product_page,
    text_of,
)
from tests.factories import create_product, create_user, create_users, issue_items, row_counts
from tests.jobs.memory_chain import MemoryChain
from tests.jobs.test_worker import key_of

CHAIN = "WestendAssetHub"
STRANGER = bytes(range(32))  # a wallet no user of the project holds
FAKE = "https://elsewhere.example/fake.json"
UNAVAILABLE = f"chain {CHAIN} is unavailable: cannot reach ws://memory: connection refused"


@dataclass
class Minted:
    """An NFT product whose items the worker minted, one to each of ``users``."""

    product: dict
    users: list[dict]
    path: str  # its console page


async def minted(client, tenant, chain: MemoryChain, worker, count: int = 4) -> Minted:
    await fund(client, tenant, chain)
    product = await create_product(
        client, tenant, name="Collectible", mint_nft=True, chain=CHAIN, metadata_uri=METADATA
    )
    users = await create_users(client, tenant, count)
    await issue_items(client, tenant, product["id"], *(u["id"] for u in users))
    assert await worker.run_until_idle() == 2  # the collection, then the mints at once
    assert [chain.item_owner(0, n) for n in range(1, count + 1)] == [key_of(u) for u in users]
    return Minted(product, users, product_page(tenant, product["id"]))


def drift(chain: MemoryChain, users: list[dict]) -> None:
    """What changes on the chain behind Tessera's back."""
    del chain.owners[0, 1]  # NFT 1 burnt
    chain.collections[0].items.discard(1)
    chain.metadata[0, 2] = FAKE
    chain.owners[0, 3] = key_of(users[0])  # moved to another user's custodial wallet
    chain.owners[0, 4] = STRANGER
    chain.owners[0, 9] = STRANGER  # minted outside Tessera
    chain.collections[0].items.add(9)


def address_of(app, key: bytes) -> str:
    return ss58_address(key, app.state.chains.config(CHAIN).ss58_prefix)


def table(page: str, css_class: str) -> list[list[str]]:
    """The body rows of the page's table of that class, each as its cells' text."""
    block = page.split(f'<table class="{css_class}">')[1].split("</table>")[0]
    body = block.split("<tbody>")[1]
    return [
        [text_of(cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def the_findings(app, users: list[dict]) -> list[list[str]]:
    """``drift``'s findings as the page's table shows them: kind, item, the database's side,
    the chain's."""

    def holder(user: dict) -> str:
        return f"user id: {user['id']} wallet: {address_of(app, key_of(user))}"

    stranger = address_of(app, STRANGER)
    first, _, third, fourth = users
    return [
        ["missing_on_chain", "1", f"nft status: minted {holder(first)}", "nothing"],
        ["metadata_mismatch", "2", f"metadata: {METADATA}", f"metadata: {FAKE}"],
        [
            "owner_mismatch",
            "3",
            holder(third),
            f"owner: {address_of(app, key_of(first))} user id: {first['id']}",
        ],
        ["owner_mismatch", "4", holder(fourth), f"owner: {stranger} user id: none"],
        ["unexpected_on_chain", "9", "nothing", f"owner: {stranger} user id: none metadata: none"],
    ]


def facts_of(page: str) -> str:
    """The line under "Reconciliation with the chain"."""
    section = page.split("<h2>Reconciliation with the chain</h2>")[1]
    return text_of(section.split('<p class="facts">')[1].split("</p>")[0])


async def jobs_of(database, ids: list[str]) -> dict[str, tuple[str, str, str]]:
    """The jobs of these ids: kind, subject, status."""
    async with orm.session(database, write=False) as session:
        found = await session.scalars(select(Job).where(Job.id.in_([uuid.UUID(i) for i in ids])))
        return {str(job.id): (job.kind, job.subject, job.status) for job in found}


async def check_now(console, path: str):
    return await console.post(f"{path}/reconciliation")


async def repair(console, path: str, *, dry_run: bool):
    return await console.post(
        f"{path}/reconciliation/repair", {"dry_run": "true" if dry_run else "false"}
    )


class TestPage:
    async def test_never_checked_then_no_drift(self, owner, client, tenant, chain, worker):
        made = await minted(client, tenant, chain, worker)
        shown = await owner.get(made.path)
        assert shown.status_code == 200
        assert "Never checked: no check has compared this product's NFTs with the chain yet." in (
            html.unescape(shown.text)
        )
        assert f'action="{made.path}/reconciliation"' in shown.text
        assert "Repair</button>" not in shown.text  # nothing found to repair yet

        checked = await check_now(owner, made.path)
        assert checked.status_code == 303
        assert checked.headers["location"].split("?")[0] == made.path
        assert notice_of(checked) == "Checked 4 items: no drift."
        shown = await owner.get(checked.headers["location"])
        assert "Checked 4 items: no drift." in shown.text
        assert "No drift: the chain agrees with the database." in shown.text
        assert re.fullmatch(
            rf"Last checked \d{{4}}-\d\d-\d\d \d\d:\d\d UTC · 4 items checked · collection 0 on "
            rf"{CHAIN}",
            facts_of(shown.text),
        )
        assert '<table class="findings">' not in shown.text
        assert "Repair</button>" not in shown.text

    async def test_findings_are_shown_as_the_api_finds_them(
        self, owner, app, client, tenant, chain, worker
    ):
        made = await minted(client, tenant, chain, worker)
        drift(chain, made.users)
        checked = await check_now(owner, made.path)
        assert notice_of(checked) == "Checked 4 items: 5 findings."
        shown = await owner.get(made.path)
        assert table(shown.text, "findings") == the_findings(app, made.users)
        assert "5 findings: where the database and the chain disagree" in shown.text
        assert "No drift" not in shown.text
        assert f'action="{made.path}/reconciliation/repair"' in shown.text
        assert "style=" not in shown.text and "<script" not in shown.text
        # The API's check finds the same.
        reconciliation = f"/v1/products/{made.product['id']}/reconciliation"
        api = await client.get(reconciliation, headers=tenant.r)
        assert api.status_code == 200
        assert [(f["kind"], f["item_id"]) for f in api.json()["findings"]] == [
            (row[0], int(row[1])) for row in the_findings(app, made.users)
        ]

    async def test_the_page_shows_the_recorded_check_without_asking_the_chain(
        self, owner, app, client, tenant, chain, worker
    ):
        made = await minted(client, tenant, chain, worker)
        drift(chain, made.users)
        await check_now(owner, made.path)
        chain.unreachable = True
        calls = len(chain.blocks)
        shown = await owner.get(made.path)
        assert shown.status_code == 200
        assert table(shown.text, "findings") == the_findings(app, made.users)
        assert len(chain.blocks) == calls

    async def test_a_product_without_nfts_has_no_reconciliation(
        self, owner, client, database, tenant
    ):
        product = await create_product(client, tenant)
        path = product_page(tenant, product["id"])
        shown = await owner.get(path)
        assert shown.status_code == 200
        assert "Reconciliation with the chain" not in shown.text
        assert "Check now" not in shown.text
        before = await row_counts(database)
        for refused in (await check_now(owner, path), await repair(owner, path, dry_run=True)):
            assert refused.status_code == 409
            assert "this product does not mint NFTs: there is nothing to reconcile" in (
                refused.text
            )
        assert await row_counts(database) == before


class TestRepair:
    async def test_the_dry_run_lists_the_actions_and_changes_nothing(
        self, owner, app, client, database, tenant, chain, worker
    ):
        made = await minted(client, tenant, chain, worker)
        drift(chain, made.users)
        await check_now(owner, made.path)
        items = await api_items(client, tenant, made.product["id"])
        before, calls = await row_counts(database), len(chain.blocks)

        shown = await repair(owner, made.path, dry_run=True)
        assert shown.status_code == 200
        assert "Repair Collectible: what it would do" in shown.text
        assert "Nothing has changed yet: a repair takes one action per finding." in shown.text
        findings = the_findings(app, made.users)
        actions = [
            ("mint", "mint the NFT again, to its holder's wallet"),
            ("set_metadata", "set the product's metadata on the NFT again"),
            ("transfer_back", "move the NFT back, with the custodial key that holds it now"),
            ("mark_external", "mark the item as held in a wallet outside Tessera"),
            ("report", "nothing: reported for an operator to decide"),
        ]
        assert table(html.unescape(shown.text), "repairs") == [
            [item, kind, action, does, database_side, chain_side]
            for (kind, item, database_side, chain_side), (action, does) in zip(
                findings, actions, strict=True
            )
        ]
        assert f'<form method="post" action="{made.path}/reconciliation/repair">' in shown.text
        assert '<input type="hidden" name="dry_run" value="false">' in shown.text
        assert "Queue these repairs</button>" in shown.text
        assert "style=" not in shown.text and "<script" not in shown.text

        assert await row_counts(database) == before  # no job, no change (nor a new drift)
        assert await api_items(client, tenant, made.product["id"]) == items
        assert len(chain.blocks) == calls

    async def test_confirming_queues_the_jobs_that_repair_the_drift(
        self, owner, app, client, database, tenant, chain, worker
    ):
        made = await minted(client, tenant, chain, worker)
        drift(chain, made.users)
        await check_now(owner, made.path)
        jobs_before = (await row_counts(database))["jobs"]

        queued = await repair(owner, made.path, dry_run=False)
        assert queued.status_code == 200
        assert "Repairs queued for Collectible" in queued.text
        assert "Queue these repairs" not in queued.text
        rows = table(html.unescape(queued.text), "repairs")
        assert [(row[0], row[2]) for row in rows] == [
            ("1", "mint"),
            ("2", "set_metadata"),
            ("3", "transfer_back"),
            ("4", "mark_external"),
            ("9", "report"),
        ]
        job_ids = [row[6] for row in rows[:4]]
        assert rows[4][6] == "none"  # reported only
        for job_id in job_ids:
            assert f'<a href="/console/jobs"><code>{job_id}</code></a>' in queued.text
        items = {i["item_id"]: i["id"] for i in await api_items(client, tenant, made.product["id"])}
        assert await jobs_of(database, job_ids) == {
            job_ids[0]: (JobKind.MINT, f"item:{items[1]}", "queued"),
            job_ids[1]: (JobKind.MINT, f"item:{items[2]}", "queued"),
            job_ids[2]: (JobKind.TRANSFER, f"item:{items[3]}", "queued"),
            job_ids[3]: (JobKind.FOLLOW, f"item:{items[4]}", "queued"),
        }
        assert (await row_counts(database))["jobs"] == jobs_before + 4

        # Confirmed again while they wait: the same actions, with their jobs already queued.
        again = table(
            html.unescape((await repair(owner, made.path, dry_run=False)).text), "repairs"
        )
        assert again == rows
        assert (await row_counts(database))["jobs"] == jobs_before + 4

        # The worker carries them out (the mint and the metadata in one batch): only the NFT
        # minted outside Tessera is left to decide.
        assert await worker.run_until_idle() == 3
        assert chain.item_owner(0, 1) == key_of(made.users[0])
        assert chain.item_metadata(0, 2) == METADATA
        assert chain.item_owner(0, 3) == key_of(made.users[2])
        checked = await check_now(owner, made.path)
        assert notice_of(checked) == "Checked 4 items: 1 finding."
        shown = await owner.get(made.path)
        assert table(shown.text, "findings") == the_findings(app, made.users)[4:]

    async def test_nothing_to_repair_is_said(self, owner, client, tenant, chain, worker):
        made = await minted(client, tenant, chain, worker, count=1)
        shown = await repair(owner, made.path, dry_run=True)
        assert shown.status_code == 200
        assert "No drift: the chain agrees with the database, there is nothing to repair." in (
            shown.text
        )
        assert "Queue these repairs" not in shown.text

    async def test_findings_reported_only_offer_nothing_to_queue(
        self, owner, client, tenant, chain, worker
    ):
        made = await minted(client, tenant, chain, worker, count=1)
        chain.owners[0, 9] = STRANGER
        shown = await repair(owner, made.path, dry_run=True)
        assert table(html.unescape(shown.text), "repairs")[0][:3] == [
            "9",
            "unexpected_on_chain",
            "report",
        ]
        assert "Nothing to queue: every finding is reported only" in shown.text
        assert "Queue these repairs" not in shown.text

    async def test_the_dry_run_flag_takes_true_or_false(self, owner, client, tenant, chain, worker):
        made = await minted(client, tenant, chain, worker, count=1)
        refused = await owner.post(f"{made.path}/reconciliation/repair", {"dry_run": "yes"})
        assert refused.status_code == 400
        assert "dry_run: Input should be &#39;true&#39; or &#39;false&#39;" in refused.text


class TestChainDown:
    @pytest.mark.parametrize(
        ("form", "heading"),
        [
            ("check", "The chain was not checked"),
            ("dry run", "Nothing was repaired"),
            ("repair", "Nothing was repaired"),
        ],
    )
    async def test_the_error_is_shown_and_nothing_changes(
        self, owner, app, client, database, tenant, chain, worker, form, heading
    ):
        made = await minted(client, tenant, chain, worker)
        drift(chain, made.users)
        await check_now(owner, made.path)
        chain.unreachable = True
        before = await row_counts(database)
        async with orm.session(database, write=False) as session:
            recorded = await session.get(Reconciliation, uuid.UUID(made.product["id"]))
            assert recorded is not None
            checked_at = recorded.checked_at
        refused = {
            "check": lambda: check_now(owner, made.path),
            "dry run": lambda: repair(owner, made.path, dry_run=True),
            "repair": lambda: repair(owner, made.path, dry_run=False),
        }[form]
        shown = await refused()
        assert shown.status_code == 503
        assert f"<h1>{heading}</h1>" in shown.text
        assert f"<li>{UNAVAILABLE}</li>" in shown.text
        assert await row_counts(database) == before
        async with orm.session(database, write=False) as session:
            recorded = await session.get(Reconciliation, uuid.UUID(made.product["id"]))
            assert recorded is not None and recorded.checked_at == checked_at
        # The page still shows the last check that ran.
        page = await owner.get(made.path)
        assert table(page.text, "findings") == the_findings(app, made.users)


class TestScope:
    async def test_another_projects_owner_gets_404_and_nothing_runs(
        self, owner, client, database, tenant, other, chain, worker
    ):
        theirs = await minted(client, other, chain, worker, count=1)
        chain.owners[0, 9] = STRANGER
        calls, before = len(chain.blocks), await row_counts(database)
        # Their product, in their project and under the owner's own.
        for path in (theirs.path, product_page(tenant, theirs.product["id"])):
            assert (await check_now(owner, path)).status_code == 404
            assert (await repair(owner, path, dry_run=True)).status_code == 404
            assert (await repair(owner, path, dry_run=False)).status_code == 404
        assert await row_counts(database) == before
        assert len(chain.blocks) == calls

    async def test_a_forged_form_changes_nothing(self, owner, client, database, tenant, chain):
        await fund(client, tenant, chain)
        product = await create_product(
            client, tenant, mint_nft=True, chain=CHAIN, metadata_uri=METADATA
        )
        await issue_items(client, tenant, product["id"], (await create_user(client, tenant))["id"])
        path = product_page(tenant, product["id"])
        before = await row_counts(database)
        for target, form in (
            (f"{path}/reconciliation", {}),
            (f"{path}/reconciliation/repair", {"dry_run": "false"}),
        ):
            forged = await owner.http.post(target, data=form | {"csrf": "not-the-token"})
            missing = await owner.http.post(target, data=form)
            assert forged.status_code == missing.status_code == 403
        assert await row_counts(database) == before

    async def test_an_operator_checks_any_project(self, operator, client, tenant, chain, worker):
        made = await minted(client, tenant, chain, worker, count=1)
        checked = await check_now(operator, made.path)
        assert notice_of(checked) == "Checked 1 item: no drift."
