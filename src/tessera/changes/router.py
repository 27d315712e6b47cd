from typing import Annotated

from fastapi import Query
from pydantic import Field

from tessera.auth.dependencies import CallerDep, project_router
from tessera.changes import feed
from tessera.changes.feed import CURSOR_PATTERN, ChangeList, Place
from tessera.errors import responses
from tessera.schemas import SnakeInput

router = project_router("/changes", tags=["changes"])


class ChangesQuery(SnakeInput):
    after: str | None = Field(
        default=None,
        max_length=37,
        pattern=CURSOR_PATTERN,
        description="The `cursor` of the previous page; absent: from the oldest change kept.",
    )
    limit: int = Field(default=100, ge=1, le=1000)


@router.get("", response_model=ChangeList, responses=responses(400, 401))
async def list_changes(caller: CallerDep, query: Annotated[ChangesQuery, Query()]) -> ChangeList:
    """The project's changes in commit order, each once: pass the answer's `cursor` as `after`
    for the next page (an empty page keeps the cursor: ask again later). Changes are kept for
    `TESSERA_CHANGES_RETENTION_DAYS`; docs/webhooks.md lists every `type` and its `data`."""
    after = Place.of_cursor(query.after) if query.after is not None else feed.START
    return await caller.database.read(
        feed.read_page, caller.principal.project_id, after, query.limit
    )
