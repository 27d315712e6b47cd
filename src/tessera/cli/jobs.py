"""``tessera jobs``: the durable jobs; ``tessera chain reconcile``: NFTs compared with the chain."""

import uuid
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer

from tessera.cli.common import ProjectOpt, job_context, project_principal, run, show
from tessera.config import Settings
from tessera.db import Database
from tessera.models import JobStatus

if TYPE_CHECKING:
    from rich.table import Table

    from tessera.chain.registry import Chains

app = typer.Typer(no_args_is_help=True, help="Durable jobs (NFT collections, mints, transfers).")
chain_app = typer.Typer(no_args_is_help=True, help="NFTs on chain, compared with the database.")


@app.command("list")
def jobs_list(
    status: Annotated[JobStatus | None, typer.Option(help="Only jobs of this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
) -> None:
    """The newest jobs, optionally of one status."""
    from tessera.jobs.schemas import JobRead
    from tessera.jobs.service import list_jobs

    async def work(database: Database, _settings: Settings) -> list[JobRead]:
        jobs = await list_jobs(database, status=status, limit=limit)
        return [JobRead.model_validate(job) for job in jobs]

    show(run(work))


@app.command("retry")
def jobs_retry(job_id: Annotated[uuid.UUID, typer.Argument(help="Job id.")]) -> None:
    """Queue a job again with fresh attempts (and its item or product back to queued)."""
    from tessera.jobs.schemas import JobRead
    from tessera.jobs.service import retry_job
    from tessera.main import job_handlers

    async def work(database: Database, settings: Settings) -> JobRead:
        context = job_context(database, settings)
        job = await retry_job(context, job_handlers(), job_id=job_id)
        return JobRead.model_validate(job)

    show(run(work))


UNBOUNDED = 10_000  # columns


class ProductCheck(NamedTuple):
    """One product's line of ``tessera chain reconcile``: its findings by kind, and with
    ``--repair`` the actions they got by (kind, action); ``report`` is reported only, no job."""

    product_id: uuid.UUID
    items_checked: int
    findings: Counter[str]
    actions: Counter[tuple[str, str]]


@chain_app.command("reconcile")
def chain_reconcile(
    project: ProjectOpt,
    product: Annotated[
        uuid.UUID | None,
        typer.Option("--product", help="This product only (default: each mint_nft product)."),
    ] = None,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Queue each finding's repair as a job, for the worker."),
    ] = False,
) -> None:
    """Compare the project's NFTs with the chain, product by product, recording each result as
    GET /v1/products/{id}/reconciliation does; prints a table of the findings by kind. Exits 1
    when a product has a finding (a repair queued is not done yet: check again once the worker
    has run it), 0 when everything agrees."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from tessera.chain.registry import Chains
    from tessera.reconciliation.repository import nft_products

    async def work(database: Database, settings: Settings) -> list[ProductCheck]:
        await project_principal(database, project)  # 404 for no such project
        ids = [product] if product else await database.read(nft_products, project)
        chains = Chains(settings)
        checks: list[ProductCheck] = []
        # On a terminal's stderr, and gone once done: stdout carries the table only.
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        shown_on = Console(stderr=True)
        progress = Progress(
            *columns, console=shown_on, transient=True, disable=not shown_on.is_terminal
        )
        try:
            with progress:
                task = progress.add_task("reconciling", total=len(ids))
                for product_id in ids:
                    progress.update(task, description=f"reconciling {product_id}")
                    checks.append(
                        await _check_product(database, chains, project, product_id, repair=repair)
                    )
                    progress.advance(task)
        finally:
            chains.close()
        return checks

    checks = run(work)
    table = _reconciliation_table(project, checks, repair=repair)
    console = Console()
    if not console.is_terminal:  # a pipe or a file: the whole table, never wrapped at 80
        unbounded = console.options.update_width(UNBOUNDED)
        console = Console(width=console.measure(table, options=unbounded).maximum)
    console.print(table)
    if any(check.findings for check in checks):
        raise typer.Exit(1)


async def _check_product(
    database: Database, chains: "Chains", project: uuid.UUID, product_id: uuid.UUID, *, repair: bool
) -> ProductCheck:
    from tessera.reconciliation import service

    if not repair:
        shown = (await service.reconcile(database, chains, project, product_id)).shown
        kinds = Counter(finding.kind.value for finding in shown.findings)
        return ProductCheck(product_id, shown.items_checked, kinds, Counter())
    repaired = await service.repair(database, chains, project, product_id, dry_run=False)
    last = await database.read(service.last_reconciliation, project, product_id)
    assert last is not None  # the repair's own check
    return ProductCheck(
        product_id,
        last.items_checked,
        Counter(action.kind.value for action in repaired.actions),
        Counter((action.kind.value, action.action.value) for action in repaired.actions),
    )


def _reconciliation_table(
    project: uuid.UUID, checks: Sequence[ProductCheck], *, repair: bool
) -> "Table":
    from rich.table import Table

    from tessera.reconciliation.findings import Action, Kind

    def findings_cell(check: ProductCheck) -> str:
        """A line per kind found, in the order of ``Kind``."""
        kinds = [kind for kind in Kind if check.findings[kind]]
        return "\n".join(f"{kind}: {check.findings[kind]}" for kind in kinds) or "none"

    def actions_cell(check: ProductCheck) -> str:
        """The actions, each on the line of the kind they repair."""
        kinds = [kind for kind in Kind if check.findings[kind]]
        by_kind = [[(a, check.actions[kind, a]) for a in Action] for kind in kinds]
        return "\n".join(", ".join(f"{a}: {n}" for a, n in done if n) for done in by_kind) or "none"

    drifted = [check for check in checks if check.findings]
    found = sum(sum(check.findings.values()) for check in drifted)
    caption = (
        f"{found} finding(s) in {len(drifted)} of {len(checks)} product(s)"
        if drifted
        else f"no finding in {len(checks)} product(s)"
    )
    if any(action == Action.REPORT for check in checks for _, action in check.actions):
        caption += " (report: no job, an operator decides)"
    table = Table(title=f"Reconciliation of project {project}", caption=caption)
    table.add_column("product", no_wrap=True)
    table.add_column("items checked", justify="right")
    table.add_column("findings")
    if repair:
        table.add_column("actions queued")
    for check in checks:
        row = [str(check.product_id), str(check.items_checked), findings_cell(check)]
        if repair:
            row.append(actions_cell(check))
        table.add_row(*row)
    return table
