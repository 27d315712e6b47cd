"""The database in a request: the app's one ``Database``, and its FastAPI alias."""

from typing import Annotated

from fastapi import Depends, FastAPI, Request

from tessera.db.database import Database


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
