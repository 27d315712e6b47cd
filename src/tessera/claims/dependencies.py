"""The process's claim rate limits (``limiter.ClaimLimiter``) as a dependency of the claim
routes and the claim page."""

from typing import Annotated

from fastapi import Depends, Request

from tessera.claims.limiter import ClaimLimiter


async def claim_limiter(request: Request) -> ClaimLimiter:
    limiter: ClaimLimiter = request.app.state.claim_limiter
    return limiter


ClaimLimiterDep = Annotated[ClaimLimiter, Depends(claim_limiter)]
