"""The process's signers (``service.Signers``) as a dependency of the pages that show a
ticket's secret."""

from typing import Annotated

from fastapi import Depends, Request

from tessera.ticket_keys.service import Signers


async def signers_of(request: Request) -> Signers:
    signers: Signers = request.app.state.signers
    return signers


SignersDep = Annotated[Signers, Depends(signers_of)]
