from typing import Annotated

from fastapi import Query

from tessera.auth.dependencies import ReadAccess
from tessera.changes import service as feed
from tessera.changes.schemas import START, ChangeList, ChangesQuery, Place
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.web.routes import project_router

router = project_router("/changes", tags=["changes"])


@router.get("", response_model=ChangeList, responses=responses(400, 401))
async def list_changes(
    principal: ReadAccess, database: DatabaseDep, query: Annotated[ChangesQuery, Query()]
) -> ChangeList:
    """The project's changes in commit order, each once: pass the answer's `cursor` as `after`
    for the next page (an empty page keeps the cursor: ask again later). Changes are kept for
    `TESSERA_CHANGES_RETENTION_DAYS`; docs/webhooks.md lists every `type` and its `data`."""
    after = Place.of_cursor(query.after) if query.after is not None else START
    return await database.read(feed.read_page, principal.project_id, after, query.limit)
