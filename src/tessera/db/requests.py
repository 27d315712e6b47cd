"""The database in a request: FastAPI dependencies, and which requests only read."""

import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Request

from tessera.db.database import Database

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


EndpointT = TypeVar("EndpointT", bound=Callable[..., Any])

READ_ONLY_ENDPOINTS: set[Callable[..., Any]] = set()


def reads_only(endpoint: EndpointT) -> EndpointT:
    """Mark a POST route that only reads (a lookup with a body): a read credential may call it,
    and the rate limits count it as a read."""
    READ_ONLY_ENDPOINTS.add(endpoint)
    return endpoint


def is_read_only(endpoint: Callable[..., Any]) -> bool:
    """Whether ``endpoint`` (or the function it wraps) was marked ``reads_only``."""
    return inspect.unwrap(endpoint) in READ_ONLY_ENDPOINTS


def writes(request: Request) -> bool:
    """Whether the request may change data (a lookup sent as POST does not: ``reads_only``)."""
    if request.method in READ_METHODS:
        return False
    endpoint = request.scope.get("endpoint")
    return endpoint is None or not is_read_only(endpoint)


def attach(app: FastAPI, database: Database) -> None:
    """Make ``database`` the one its requests use (the app's lifespan, once)."""
    app.state.database = database


def database_of(app: FastAPI) -> Database:
    """The database attached to ``app``: its lifespan runs first."""
    database: Database = app.state.database
    return database


async def get_database(request: Request) -> Database:
    return database_of(request.app)


DatabaseDep = Annotated[Database, Depends(get_database)]
