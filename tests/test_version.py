import re


class TestVersion:
    async def test_needs_no_credential_and_reports_the_api_version(self, client):
        response = await client.get("/v1/version")
        assert response.status_code == 200
        assert response.json() == {"version": "2.72.0"}
        assert response.headers["x-tessera-build"]

    async def test_every_response_carries_a_request_id(self, client):
        response = await client.get("/v1/version")
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])
        echoed = await client.get("/v1/version", headers={"x-request-id": "abc-123"})
        assert echoed.headers["x-request-id"] == "abc-123"
        unsafe = await client.get("/v1/version", headers={"x-request-id": "a b\tc"})
        assert unsafe.headers["x-request-id"] != "a b\tc"
        missing = await client.get("/v1/users/count")
        assert missing.status_code == 401 and missing.headers["x-request-id"]
