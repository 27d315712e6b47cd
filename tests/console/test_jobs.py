"""The chain job queue page: the jobs waiting for funds, counts, the newest jobs with their
errors (or reasons to wait), and a failed job retried through the same use-case as ``tessera jobs
retry``; an owner sees their project's only."""

import uuid

from sqlalchemy import select

from tessera.jobs.queue import FUNDS, JobKind, enqueue
from tessera.models import Job, NftStatus, ProductItem
from tests import orm
from tests.console.test_users import table_rows
from tests.factories import create_product, create_user, issue_items


async def failed_job(database, project_id, **overrides):
    """A job that gave up, as the worker leaves it."""
    async with database.transaction() as tx:
        [job] = await enqueue(
            tx,
            [
                {
                    "project_id": project_id,
                    "kind": "nft.unknown",
                    "subject": f"test:{uuid.uuid4()}",
                    "payload": {},
                    "status": "failed",
                    "attempts": 8,
                    "last_error": "RuntimeError: boom",
                }
                | overrides
            ],
        )
        await tx.commit()
    return job


async def job_row(database, job_id):
    async with orm.session(database, write=False) as session:
        return await session.scalar(select(Job).where(Job.id == job_id))


async def failed_mint(client, database, tenant):
    """A real item whose mint failed: the job and the item's id."""
    user = await create_user(client, tenant)
    product = await create_product(client, tenant)
    [item] = await issue_items(client, tenant, product["id"], user["id"])
    job = await failed_job(
        database,
        tenant.project_id,
        kind=JobKind.MINT,
        subject=f"item:{item['id']}",
        payload={"product_item_id": item["id"]},
        last_error="ChainUnavailable: the node did not answer",
    )
    return job, item["id"]


class TestJobsPage:
    async def test_lists_a_failed_job_with_its_error_and_the_counts(
        self, operator, client, database, tenant
    ):
        job, _ = await failed_mint(client, database, tenant)
        await failed_job(database, tenant.project_id, status="succeeded", last_error=None)
        shown = await operator.get("/console/jobs")
        assert shown.status_code == 200
        rows = table_rows(shown.text)
        assert ["nft.mint", "0", "0", "0", "1"] in rows  # kind, queued/running/succeeded/failed
        assert ["nft.unknown", "0", "0", "1", "0"] in rows
        assert ["All kinds", "0", "0", "1", "1"] in rows
        [mint] = [row for row in rows if row[1:3] == ["nft.mint", job.subject]]
        assert mint[0] == "Acme" and mint[3:5] == ["failed", "8"]
        assert mint[-1] == "ChainUnavailable: the node did not answer Retry"
        assert f'action="/console/jobs/{job.id}/retry"' in shown.text

    async def test_filters_by_status(self, operator, database, tenant):
        failed = await failed_job(database, tenant.project_id)
        done = await failed_job(database, tenant.project_id, status="succeeded", last_error=None)
        only_failed = await operator.get("/console/jobs?status=failed")
        assert failed.subject in only_failed.text and done.subject not in only_failed.text
        only_done = await operator.get("/console/jobs?status=succeeded")
        assert done.subject in only_done.text and failed.subject not in only_done.text
        unknown = await operator.get("/console/jobs?status=lost")
        assert unknown.status_code == 400 and "status: one of" in unknown.text

    async def test_an_owner_sees_only_their_projects_jobs(self, owner, database, tenant, other):
        mine = await failed_job(database, tenant.project_id)
        theirs = await failed_job(database, other.project_id, kind="nft.transfer")
        shown = await owner.get("/console/jobs")
        assert shown.status_code == 200
        assert mine.subject in shown.text and theirs.subject not in shown.text
        assert "nft.transfer" not in shown.text  # not in the counts either


# A mint's job while the project wallet cannot pay, as the worker leaves it.
FUNDS = (
    f"waiting: {FUNDS}: the project wallet 5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY "
    "holds 0.1 WND on WestendAssetHub; minting 3 NFTs needs about 0.7 WND; 3 wait until funded"
)


async def waiting_job(database, project_id, kind="nft.mint", last_error=FUNDS):
    return await failed_job(
        database, project_id, kind=kind, status="queued", attempts=0, last_error=last_error
    )


class TestWaitingForFunds:
    async def test_a_count_at_the_top_and_the_reason_on_each_job(
        self, operator, database, tenant, other
    ):
        mine = [await waiting_job(database, tenant.project_id) for _ in range(2)]
        await waiting_job(database, tenant.project_id, kind="nft.transfer")
        await waiting_job(database, other.project_id)
        # Queued for another reason, and a job that gave up: not waiting for funds.
        later = await waiting_job(database, tenant.project_id, last_error="waiting: another batch")
        await failed_job(database, tenant.project_id, last_error=FUNDS)

        shown = await operator.get("/console/jobs")
        assert shown.status_code == 200
        text = shown.text
        assert text.index("Waiting for funds") < text.index("By kind and status")
        assert (
            "4 queued jobs wait for funds: the project wallet cannot pay the fees and deposits."
            in text
        )
        rows = table_rows(text)
        assert ["Project", "Kind", "Jobs waiting for funds"] in rows
        assert ["Acme", "nft.mint", "2"] in rows and ["Acme", "nft.transfer", "1"] in rows
        assert ["Other", "nft.mint", "1"] in rows
        [first] = [row for row in rows if row[1:3] == ["nft.mint", mine[0].subject]]
        # project, kind, subject, status, attempts, run after, created, last error
        assert first[:5] == ["Acme", "nft.mint", mine[0].subject, "queued, waiting for funds", "0"]
        assert first[-1] == FUNDS
        [other_reason] = [row for row in rows if row[2:3] == [later.subject]]
        assert other_reason[3] == "queued" and other_reason[-1] == "waiting: another batch"

    async def test_an_owner_counts_their_projects_only(self, owner, database, tenant, other):
        await waiting_job(database, tenant.project_id)
        await waiting_job(database, other.project_id)
        await waiting_job(database, other.project_id, kind="nft.transfer")
        shown = await owner.get("/console/jobs")
        assert "1 queued job waits for funds:" in shown.text
        rows = table_rows(shown.text)
        assert ["Kind", "Jobs waiting for funds"] in rows and ["nft.mint", "1"] in rows
        assert "nft.transfer" not in shown.text

    async def test_nothing_waiting_nothing_said(self, operator, database, tenant):
        await failed_job(database, tenant.project_id)
        shown = await operator.get("/console/jobs")
        assert "Waiting for funds" not in shown.text and "wait for funds" not in shown.text


class TestRetry:
    async def test_a_failed_mint_is_queued_again(self, operator, client, database, tenant):
        job, item_id = await failed_mint(client, database, tenant)
        retried = await operator.post(f"/console/jobs/{job.id}/retry")
        assert retried.status_code == 303
        assert retried.headers["location"] == "/console/jobs?notice=Job%20queued%20again."
        again = await job_row(database, job.id)
        assert (again.status, again.attempts, again.last_error) == ("queued", 0, None)
        async with orm.session(database, write=False) as session:
            item = await session.get(ProductItem, uuid.UUID(item_id))
        assert item.nft_status == NftStatus.QUEUED  # the handler shows it on the item
        shown = await operator.get(retried.headers["location"])
        assert "Job queued again." in shown.text

    async def test_a_job_that_is_not_failed_is_refused(self, operator, database, tenant):
        queued = await failed_job(database, tenant.project_id, status="queued", last_error=None)
        refused = await operator.post(f"/console/jobs/{queued.id}/retry")
        assert refused.status_code == 409 and "only a failed job can be retried" in refused.text
        missing = await operator.post(f"/console/jobs/{uuid.uuid4()}/retry")
        assert missing.status_code == 404

    async def test_an_owner_cannot_retry_another_projects_job(self, owner, database, other):
        theirs = await failed_job(database, other.project_id)
        refused = await owner.post(f"/console/jobs/{theirs.id}/retry")
        assert refused.status_code == 404
        assert (await job_row(database, theirs.id)).status == "failed"

    async def test_an_owner_retries_their_own(self, owner, database, tenant):
        mine = await failed_job(database, tenant.project_id)
        assert (await owner.post(f"/console/jobs/{mine.id}/retry")).status_code == 303
        assert (await job_row(database, mine.id)).status == "queued"

    async def test_a_forged_csrf_token_changes_nothing(self, operator, database, tenant):
        job = await failed_job(database, tenant.project_id)
        forged = await operator.http.post(
            f"/console/jobs/{job.id}/retry", data={"csrf": "not-the-token"}
        )
        assert forged.status_code == 403
        assert (await job_row(database, job.id)).status == "failed"
