"""A product's reconciliation with the chain, from its page (docs/chain.md, Reconciliation): "Check
now" compares the product's NFTs with the chain and shows the page again with the result;
"Repair" shows first what a repair would do (the dry run, which changes nothing), and its
confirmation queues those actions as jobs and shows them.

The same use-cases as the API (``tessera.reconciliation.service``) on the app's chains, in the
request as the API runs them. A chain that does not answer (or is not configured) is a page
with the use-case's message and status, like every refusal of the console.
"""

import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from tessera.chain.registry import ChainsDep
from tessera.console.forms import RepairForm
from tessera.console.web import PosterDep, back_to, page, problem, project_of
from tessera.db import DatabaseDep
from tessera.errors import AppError
from tessera.products import service as products
from tessera.reconciliation import service
from tessera.reconciliation.findings import Action
from tessera.reconciliation.schemas import ReconciliationRead

router = APIRouter(prefix="/console", include_in_schema=False)

# What each action does, in the words of the repair's page.
ACTIONS = {
    Action.MINT: "mint the NFT again, to its holder's wallet",
    Action.SET_METADATA: "set the product's metadata on the NFT again",
    Action.TRANSFER_BACK: "move the NFT back, with the custodial key that holds it now",
    Action.FOLLOW: "the item follows its NFT to the user who holds that wallet",
    Action.MARK_EXTERNAL: "mark the item as held in a wallet outside Tessera",
    Action.RETRY: "run the stuck job again",
    Action.REPORT: "nothing: reported for an operator to decide",
}


def _product_path(project_id: uuid.UUID, product_id: uuid.UUID) -> str:
    return f"/console/projects/{project_id}/products/{product_id}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def summary(shown: ReconciliationRead) -> str:
    """A check's result in a line: the items checked, and the findings or no drift."""
    found = _plural(len(shown.findings), "finding") if shown.findings else "no drift"
    return f"Checked {_plural(shown.items_checked, 'item')}: {found}."


@router.post(
    "/projects/{project_id}/products/{product_id}/reconciliation", response_class=HTMLResponse
)
async def check_product(
    request: Request,
    database: DatabaseDep,
    chains: ChainsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
) -> Response:
    project = await project_of(database, user, project_id)
    try:
        checked = await service.reconcile(database, chains, project.id, product_id, in_request=True)
    except AppError as error:
        return problem(request, error, "The chain was not checked")
    return back_to(_product_path(project.id, product_id), summary(checked.shown))


@router.post(
    "/projects/{project_id}/products/{product_id}/reconciliation/repair",
    response_class=HTMLResponse,
)
async def repair_product(
    request: Request,
    database: DatabaseDep,
    chains: ChainsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    form: Annotated[RepairForm, Form()],
) -> Response:
    """The dry run (``dry_run`` "true", the default) shows the actions and a form confirming
    them; the confirmation ("false") queues them and shows their jobs. Answered as a page, not
    a redirect: what it shows is this check's, not stored."""
    project = await project_of(database, user, project_id)
    try:
        product = await products.get_product(
            database, user.principal(project), product_id=product_id
        )
        repaired = await service.repair(
            database,
            chains,
            project.id,
            product_id,
            dry_run=form.dry_run == "true",
            in_request=True,
        )
    except AppError as error:
        return problem(request, error, "Nothing was repaired")
    return page(
        request,
        "products_repair.html",
        {
            "project": project,
            "product": product,
            "path": _product_path(project.id, product_id),
            "repair": repaired,
            "to_queue": any(a.action != Action.REPORT for a in repaired.actions),
            "actions": ACTIONS,
        },
    )
