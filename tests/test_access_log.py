"""The access log: one JSON object per request with its id when on, nothing when off."""

import json
import logging

import httpx
import pytest

from tessera.main import create_app


async def _get(app, path: str, **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as client:
        return await client.get(path, headers=headers)


@pytest.fixture
def access_log(caplog) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="tessera.access")
    return caplog


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tessera.access"]


async def test_on_it_logs_one_json_line_per_request(settings, access_log):
    app = create_app(settings.model_copy(update={"access_log": True}))
    response = await _get(app, "/v1/version?probe=1", **{"x-request-id": "req-access-1"})
    assert response.status_code == 400  # an unknown query parameter
    [text] = _lines(access_log)
    line = json.loads(text)
    assert line.pop("duration_ms") >= 0
    assert line == {
        "request_id": "req-access-1",
        "method": "GET",
        "path": "/v1/version",  # never the query string
        "status": 400,
    }


async def test_off_it_logs_nothing(settings, access_log):
    app = create_app(settings.model_copy(update={"access_log": False}))
    assert (await _get(app, "/v1/version")).status_code == 200
    assert _lines(access_log) == []
