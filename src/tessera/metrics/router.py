"""``GET /metrics``: for Prometheus, outside the API (no project credential, not in the OpenAPI).

With ``TESSERA_METRICS_TOKEN`` set it wants ``Authorization: Bearer <token>`` (401 otherwise);
without, it answers loopback clients only (403 for others). Behind a reverse proxy on the same
host, every client looks local unless the proxy is named in ``TESSERA_FORWARDED_ALLOW_IPS``:
set the token then, or do not route /metrics.
"""

import hmac
import ipaddress

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import MetricsNotLocal, MetricsTokenInvalid
from tessera.metrics import service


async def may_read_metrics(request: Request, settings: SettingsDep) -> None:
    if settings.metrics_token is not None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        expected = settings.metrics_token.get_secret_value().encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
            raise MetricsTokenInvalid
    elif not _is_loopback(request.client.host if request.client else None):
        raise MetricsNotLocal


def _is_loopback(host: str | None) -> bool:
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


router = APIRouter(include_in_schema=False, dependencies=[Depends(may_read_metrics)])


@router.get("/metrics")
async def get_metrics(database: DatabaseDep, settings: SettingsDep) -> Response:
    """Prometheus text format: requests, latency, database pool, job queue, wallet balances,
    webhooks, NFT drift, mails."""
    return Response(await service.scrape(database, settings), media_type=CONTENT_TYPE_PLAIN_0_0_4)
