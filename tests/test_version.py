import re

from fastapi import Response

from tessera.api import get_version


class TestVersion:
    async def test_needs_no_credential_and_reports_the_api_version(self, client):
        response = await client.get("/v1/version")
        assert response.status_code == 200
        assert response.json() == {"version": "2.72.0"}
        assert response.headers["x-tessera-build"]

    async def test_the_health_check_answer_is_the_routes_answer(self, app, client):
        fast = await client.get("/v1/version")
        # A query string goes through FastAPI's route: a known one would answer the same.
        routed = await client.get("/v1/version?probe=1")
        assert routed.status_code == 400
        assert routed.json() == {"errors": ["probe: unknown query parameter"]}
        assert fast.content == b'{"version":"2.72.0"}'
        assert fast.json() == (await get_version(Response())).model_dump()
        assert fast.headers["content-type"] == "application/json"
        assert fast.headers["content-length"] == str(len(fast.content))
        assert "/v1/version" in app.openapi()["paths"]

    async def test_every_response_carries_a_request_id(self, client):
        response = await client.get("/v1/version")
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])
        echoed = await client.get("/v1/version", headers={"x-request-id": "abc-123"})
        assert echoed.headers["x-request-id"] == "abc-123"
        unsafe = await client.get("/v1/version", headers={"x-request-id": "a b\tc"})
        assert unsafe.headers["x-request-id"] != "a b\tc"
        missing = await client.get("/v1/users/count")
        assert missing.status_code == 401 and missing.headers["x-request-id"]
