"""``GET /v1/health/ready``: open (an orchestrator's probe carries no credential)."""

from fastapi import APIRouter, Depends, Response

from tessera.errors import responses
from tessera.health.readiness import ReadinessDep, ReadinessRead
from tessera.schemas import known_query_only

router = APIRouter(prefix="/v1/health", tags=["health"], dependencies=[Depends(known_query_only)])


@router.get(
    "/ready",
    response_model=ReadinessRead,
    responses={
        **responses(400),
        503: {"model": ReadinessRead, "description": "Not ready: the failed checks say why."},
    },
)
async def get_readiness(response: Response, readiness: ReadinessDep) -> ReadinessRead:
    """Whether this process is ready to serve (no credential): the database answers and is at
    the code's migration head, a job worker is alive, and each configured chain answers. 200
    when every check passes, else 503 with the same body. Each check has
    TESSERA_CHAIN_REQUEST_TIMEOUT_SECONDS. ``GET /v1/version`` is the cheap liveness check."""
    report = await readiness.check()
    if not report.ready:
        response.status_code = 503
    return report
