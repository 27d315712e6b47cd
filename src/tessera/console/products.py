"""The console's products pages: a project's products with their stock, items issued and
redeemed; a product with its edit form, the form that issues items by email, its sales per day
as a chart, its items with their owners and NFTs, and (an NFT product) where its items' NFTs
stand (minted, submitted, queued and those waiting for funds, failed, transfers on chain) and
its last reconciliation with the chain, whose forms are ``console.reconciliation``'s.

Every change goes through the API's use-cases (``tessera.products.service``) with the project's
write principal, so the rules and refusals are the API's. The reads the API has no use-case for
(issued and redeemed per product, quantities sold per day, the items' NFTs by status, the events
to choose from) are the products repository's.
"""

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import StringConstraints, ValidationError

from tessera.chain.registry import ChainsDep
from tessera.config import Settings, SettingsDep
from tessera.console.forms import Field
from tessera.console.web import PosterDep, UserDep, back_to, page, project_of
from tessera.db import DatabaseDep
from tessera.errors import InvalidInput, validation_messages
from tessera.jobs.queue import FUNDS
from tessera.mail.dependencies import for_request
from tessera.products import repository, service
from tessera.products.item_schemas import ItemFilter, ItemsIssue
from tessera.products.rows import DaySold, EventChoice, ProductCounts
from tessera.products.schemas import (
    MAX_ISSUE,
    ProductCreate,
    ProductRead,
    ProductType,
    ProductUpdate,
)
from tessera.projects.repository import ProjectRow
from tessera.reconciliation.service import last_reconciliation
from tessera.schemas import MAX_PAGE, Input, PageParams
from tessera.ticket_keys.dependencies import SignersDep

router = APIRouter(prefix="/console", include_in_schema=False)

PAGE_SIZE = 50
CHART_DAYS = 31  # the chart's calendar days, up to the last day with a sale

# An address is at most 320 characters: room for MAX_ISSUE of them and their separators.
EmailList = Annotated[str, StringConstraints(max_length=MAX_ISSUE * 322)]
PageNumber = Annotated[int, Query(alias="page", ge=1, le=MAX_PAGE)]

CHECKBOXES = ("active", "is_claimable", "is_transferable", "mint_nft")
NUMBERS = ("stock", "redemption_quantity", "max_per_account", "min_rep_balance", "max_items")
# Fields an empty box clears (the others keep "" for the schema to refuse).
MAY_BE_EMPTY = (
    "event_id",
    "description",
    "stock",
    "max_per_account",
    "metadata_uri",
    "chain",
    "max_items",
)
WHOLE_NUMBER = re.compile(r"-?[0-9]{1,20}")


# What a pattern asks for, in words rather than as the pattern.
PATTERNS = {
    "price": "a number with at most 12 digits before the point and 2 after it, as 12.50",
    "metadata_uri": "an absolute URI without spaces, as https://example.com/meta.json",
}


def refused(error: ValidationError, emails: list[str] | None = None) -> InvalidInput:
    """A schema's refusal as the 400 of the API, a line per problem; an address of the issue
    form is named as typed rather than by its position."""
    problems = []
    for detail in error.errors():
        loc = detail.get("loc", ())
        if emails is not None and len(loc) == 2 and loc[0] == "emails":
            detail = {**detail, "loc": (f"email {emails[int(loc[1])]}",)}
        elif detail["type"] == "string_pattern_mismatch" and loc and loc[0] in PATTERNS:
            detail = {**detail, "msg": PATTERNS[str(loc[0])]}
        problems.append(detail)
    return InvalidInput(*validation_messages(problems))


class ProductForm(Input):
    """A product's fields as typed (the PATCH fields); a checkbox is "on" or absent."""

    name: Field = ""
    event_id: Field = ""
    description: Field = ""
    price: Field = ""
    active: Field = ""
    is_claimable: Field = ""
    is_transferable: Field = ""
    stock: Field = ""
    redemption_quantity: Field = ""
    max_per_account: Field = ""
    min_rep_balance: Field = ""
    mint_nft: Field = ""
    chain: Field = ""
    metadata_uri: Field = ""
    max_items: Field = ""

    def values(self) -> dict[str, Any]:
        """The fields as the API's schemas take them: checkboxes as booleans, whole numbers as
        integers, an empty box of a field that may be empty as None. Anything else stays as
        typed, for the schema to refuse with its reason."""
        values: dict[str, Any] = {}
        for name in ProductForm.model_fields:
            value = getattr(self, name)
            if name in CHECKBOXES:
                values[name] = value == "on"
                continue
            if name in NUMBERS:
                value = value.strip()
                if WHOLE_NUMBER.fullmatch(value):
                    value = int(value)
            if value == "" and name in MAY_BE_EMPTY:
                value = None
            values[name] = value
        return values


class ProductCreateForm(ProductForm):
    type: Field = ""

    def create(self) -> ProductCreate:
        """The product to create: an empty box is a field not sent (its default applies)."""
        sent = {"type": self.type} | self.values()
        try:
            return ProductCreate.model_validate(
                {k: v for k, v in sent.items() if v not in ("", None)}
            )
        except ValidationError as error:
            raise refused(error) from None


class IssueForm(Input):
    emails: EmailList = ""

    def issue(self) -> ItemsIssue:
        """An item to each address: one per line, or separated by commas (or semicolons, or
        spaces)."""
        emails = [e for e in re.split(r"[\s,;]+", self.emails) if e]
        try:
            return ItemsIssue.model_validate({"emails": emails})
        except ValidationError as error:
            raise refused(error, emails) from None


def changes_of(stored: ProductRead, form: ProductForm) -> ProductUpdate:
    """The fields of ``form`` whose value differs from the stored product's, as a PATCH."""
    try:
        typed = ProductUpdate.model_validate(form.values())
    except ValidationError as error:
        raise refused(error) from None
    changed = {
        name: getattr(typed, name)
        for name in typed.model_fields_set  # what the form has (not seat_category)
        if getattr(typed, name) != getattr(stored, name)
    }
    return ProductUpdate.model_validate(changed)


@dataclass(frozen=True, slots=True)
class Bar:
    day: str
    label: str
    quantity: int
    x: int
    y: int
    height: int
    label_x: int


@dataclass(frozen=True, slots=True)
class Chart:
    """Quantities sold per day, as bars of an SVG drawn by the template."""

    bars: list[Bar]
    summary: str
    width: int
    height: int
    bar_width: int
    base: int  # the y of the bars' baseline


SLOT, BAR_WIDTH, PLOT_HEIGHT, TOP, BOTTOM, SIDE = 40, 28, 150, 24, 36, 16


def chart_of(sold: Sequence[DaySold]) -> Chart | None:
    """The calendar days from the first to the last day with a sale (at most ``CHART_DAYS``,
    ending on the last), a day without a sale as 0; None when nothing was sold."""
    if not sold:
        return None
    quantities = {date.fromisoformat(row.day): int(row.quantity) for row in sold}
    last = max(quantities)
    first = max(min(quantities), last - timedelta(days=CHART_DAYS - 1))
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    peak = max(quantities[day] for day in days if day in quantities)
    base = TOP + PLOT_HEIGHT
    bars = []
    for index, day in enumerate(days):
        quantity = quantities.get(day, 0)
        height = round(quantity / peak * PLOT_HEIGHT) if peak else 0
        x = SIDE + index * SLOT + (SLOT - BAR_WIDTH) // 2
        bars.append(
            Bar(
                day=day.isoformat(),
                label=day.strftime("%m-%d"),
                quantity=quantity,
                x=x,
                y=base - height,
                height=height,
                label_x=x + BAR_WIDTH // 2,
            )
        )
    total = sum(bar.quantity for bar in bars)
    busiest = max(bars, key=lambda bar: bar.quantity)
    summary = (
        f"Quantities sold per day from {days[0].isoformat()} to {days[-1].isoformat()}: "
        f"{total} in all, the most on {busiest.day} ({busiest.quantity})."
    )
    if min(quantities) < first:
        summary += f" Days before {first.isoformat()} are not shown."
    return Chart(
        bars=bars,
        summary=summary,
        width=2 * SIDE + len(days) * SLOT,
        height=base + BOTTOM,
        bar_width=BAR_WIDTH,
        base=base,
    )


def _choices(settings: Settings, events: list[EventChoice]) -> dict[str, Any]:
    """What the product forms offer: types, the project's events, the configured chains."""
    return {
        "types": get_args(ProductType),
        "events": events,
        "chains": [chain.name for chain in settings.configured_chains()],
    }


def _products_path(project: ProjectRow) -> str:
    return f"/console/projects/{project.id}/products"


@router.get("/projects/{project_id}/products", response_class=HTMLResponse)
async def products_page(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: UserDep,
    project_id: uuid.UUID,
    page_number: PageNumber = 1,
) -> Response:
    project = await project_of(database, user, project_id)
    products = await service.list_products(
        database, user.principal(project), paging=PageParams(page=page_number, limit=PAGE_SIZE)
    )
    counts = await database.read(repository.read_counts, project.id, [p.id for p in products])
    total = await database.read(repository.count_products, project.id)
    events = await database.read(repository.event_choices, project.id)
    return page(
        request,
        "products.html",
        {
            "project": project,
            "products": [(p, counts.get(p.id, ProductCounts(p.id, 0, 0, 0))) for p in products],
            "page_number": page_number,
            "pages": max(1, -(-total // PAGE_SIZE)),
            "total": total,
            **_choices(settings, events),
        },
    )


@router.post("/projects/{project_id}/products", response_class=HTMLResponse)
async def create_product(
    database: DatabaseDep,
    chains: ChainsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    form: Annotated[ProductCreateForm, Form()],
) -> Response:
    project = await project_of(database, user, project_id)
    created = await service.create_product(
        database, user.principal(project), body=form.create(), chains=chains
    )
    return back_to(f"{_products_path(project)}/{created.id}", f"Product {created.name} created.")


@router.get("/projects/{project_id}/products/{product_id}", response_class=HTMLResponse)
async def product_page(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: UserDep,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    page_number: PageNumber = 1,
) -> Response:
    project = await project_of(database, user, project_id)
    principal = user.principal(project)
    product = ProductRead.model_validate(
        await service.get_product(database, principal, product_id=product_id)
    )
    items = await service.list_items(
        database,
        principal,
        product_id=product_id,
        query=ItemFilter(page=page_number, limit=PAGE_SIZE),
    )
    counts = await database.read(repository.read_counts, project.id, [product.id])
    # One day more than the chart's: whether days before the chart's had sales.
    sold = await database.read(repository.sold_per_day, project.id, product.id, days=CHART_DAYS + 1)
    events = await database.read(repository.event_choices, project.id)
    # The NFTs as recorded: showing the page asks the chain nothing ("Check now" does).
    progress, last_check = None, None
    if product.mint_nft:
        progress = await database.read(
            repository.nft_progress, project.id, product.id, funds_reason=FUNDS
        )
        last_check = await database.read(last_reconciliation, project.id, product.id)
    return page(
        request,
        "products_detail.html",
        {
            "project": project,
            "product": product,
            "counts": counts.get(product.id, ProductCounts(product.id, 0, 0, 0)),
            "chart": chart_of(sold),
            "items": items.items,
            "page_number": page_number,
            "pages": max(1, -(-items.pagination.total // PAGE_SIZE)),
            "max_issue": MAX_ISSUE,
            "progress": progress,
            "last_check": last_check,
            **_choices(settings, events),
        },
    )


@router.post("/projects/{project_id}/products/{product_id}", response_class=HTMLResponse)
async def update_product(
    database: DatabaseDep,
    settings: SettingsDep,
    chains: ChainsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    form: Annotated[ProductForm, Form()],
) -> Response:
    project = await project_of(database, user, project_id)
    principal = user.principal(project)
    stored = ProductRead.model_validate(
        await service.get_product(database, principal, product_id=product_id)
    )
    body = changes_of(stored, form)
    await service.update_product(
        database,
        principal,
        product_id=product_id,
        body=body,
        chains=chains,
        hash_key=settings.hash_key_bytes,
    )
    changed = ", ".join(sorted(body.model_fields_set))
    notice = f"Changed: {changed}." if changed else "Nothing to change."
    return back_to(f"{_products_path(project)}/{product_id}", notice)


@router.post("/projects/{project_id}/products/{product_id}/items", response_class=HTMLResponse)
async def issue_items(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    user: PosterDep,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    form: Annotated[IssueForm, Form()],
) -> Response:
    project = await project_of(database, user, project_id)
    principal = user.principal(project)
    items = await service.issue_items(
        database,
        principal,
        product_id=product_id,
        body=form.issue(),
        mail=for_request(request, principal, settings, signers),
    )
    notice = f"{len(items)} item{'s' if len(items) != 1 else ''} issued."
    return back_to(f"{_products_path(project)}/{product_id}", notice)
