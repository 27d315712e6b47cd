from fastapi import APIRouter

from tessera.auth.dependencies import Reader
from tessera.db import SessionDep
from tessera.errors import responses
from tessera.projects import service
from tessera.projects.schemas import ProjectWalletRead

router = APIRouter(prefix="/projects", tags=["projects"])


@router.get("/wallets", response_model=list[ProjectWalletRead], responses=responses(401))
async def fetch_project_wallets(session: SessionDep, principal: Reader) -> list[ProjectWalletRead]:
    """All wallets of the project."""
    return [
        ProjectWalletRead.model_validate(w) for w in await service.list_wallets(session, principal)
    ]
