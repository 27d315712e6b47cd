"""The PassKit web service (Apple's "Wallet Passes Web Service"), under ``/passkit``: the
``webServiceURL`` of every pass this server signs. A device registers a pass and unregisters
it with the pass's token (``Authorization: ApplePass <token>``), asks which of its passes
changed, and fetches the latest one; it sends its error log. Not configured: 404 naming the
settings."""

import logging
import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.passes import service
from tessera.passes.dependencies import PassTokenDep, WalletsDep
from tessera.passes.schemas import ChangedPasses, DeviceLogs, DeviceRegistration
from tessera.ticket_keys.dependencies import SignersDep
from tessera.web.urls import public_base

log = logging.getLogger("tessera.passes")

router = APIRouter(prefix="/passkit/v1", include_in_schema=False)

Device = Annotated[str, Path(min_length=1, max_length=128)]
PassType = Annotated[str, Path(max_length=255)]
LOG_LINE = 500  # characters of a device's log line kept


@router.post("/devices/{device}/registrations/{pass_type}/{serial}", response_model=None)
async def register_pass(
    database: DatabaseDep,
    settings: SettingsDep,
    wallets: WalletsDep,
    token: PassTokenDep,
    device: Device,
    pass_type: PassType,
    serial: uuid.UUID,
    body: DeviceRegistration,
) -> Response:
    """201 for a new registration, 200 for one the device had."""
    created = await service.register_device(
        database,
        wallets.apple_wallet(),
        hash_key=settings.hash_key_bytes,
        device=device,
        pass_type=pass_type,
        serial=serial,
        token=token,
        push_token=body.push_token,
    )
    return Response(status_code=201 if created else 200)


@router.delete("/devices/{device}/registrations/{pass_type}/{serial}", response_model=None)
async def unregister_pass(
    database: DatabaseDep,
    settings: SettingsDep,
    wallets: WalletsDep,
    token: PassTokenDep,
    device: Device,
    pass_type: PassType,
    serial: uuid.UUID,
) -> Response:
    await service.unregister_device(
        database,
        wallets.apple_wallet(),
        hash_key=settings.hash_key_bytes,
        device=device,
        pass_type=pass_type,
        serial=serial,
        token=token,
    )
    return Response(status_code=200)


@router.get("/devices/{device}/registrations/{pass_type}", response_model=None)
async def changed_passes(
    database: DatabaseDep,
    wallets: WalletsDep,
    device: Device,
    pass_type: PassType,
    passes_updated_since: Annotated[
        str | None, Query(alias="passesUpdatedSince", max_length=64)
    ] = None,
) -> ChangedPasses | Response:
    """The device's passes changed since the tag (all without one); 204 when none did."""
    changed = await service.changed_passes(
        database,
        wallets.apple_wallet(),
        device=device,
        pass_type=pass_type,
        tag=passes_updated_since,
    )
    if changed is None:
        return Response(status_code=204)
    return ChangedPasses(serial_numbers=changed.serials, last_updated=changed.tag)


@router.get("/passes/{pass_type}/{serial}", response_model=None)
async def latest_pass(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    wallets: WalletsDep,
    token: PassTokenDep,
    pass_type: PassType,
    serial: uuid.UUID,
) -> Response:
    """The pass as the device should have it now (always the whole pass: Apple makes
    ``If-Modified-Since`` optional, and a change within the same second would hide behind
    it)."""
    found = await service.latest_pass(
        database,
        wallets.apple_wallet(),
        signers,
        hash_key=settings.hash_key_bytes,
        base_url=public_base(settings, request),
        pass_type=pass_type,
        serial=serial,
        token=token,
    )
    return pass_response(found)


@router.post("/log", response_model=None)
async def device_log(wallets: WalletsDep, body: DeviceLogs) -> Response:
    """What devices report going wrong with this server's passes, into the server's log."""
    wallets.apple_wallet()
    for line in body.logs:
        log.warning("wallet device: %s", line[:LOG_LINE].replace("\n", " "))
    return Response(status_code=200)


def pass_response(found: service.PassFile, *, filename: str | None = None) -> Response:
    """A ``.pkpass`` answer: never cached; with ``filename``, a download."""
    headers = {
        "Last-Modified": found.modified.strftime("%a, %d %b %Y %H:%M:%S GMT"),
        "Cache-Control": "no-store",
    }
    if filename is not None:
        headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return Response(found.data, media_type="application/vnd.apple.pkpass", headers=headers)
