"""The app's job handlers (``worker.Handlers``) as a dependency of the console's job pages."""

from typing import Annotated

from fastapi import Depends, Request

from tessera.jobs.worker import Handlers


async def job_handlers_of(request: Request) -> Handlers:
    """The app's registry of job kinds (``tessera.main.job_handlers``): a page that retries a
    job runs it by its kind's handler."""
    handlers: Handlers = request.app.state.job_handlers
    return handlers


HandlersDep = Annotated[Handlers, Depends(job_handlers_of)]
