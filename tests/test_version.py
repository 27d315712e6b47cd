import re

from fastapi import Response

from tessera.api import ConstantAnswers, get_version


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


class TestIndex:
    """``GET /`` and ``GET /v1``: where to read on, for a person who types the address."""

    INDEX = {"name": "Tessera", "docs": "/docs", "console": "/console", "version": "/v1/version"}

    async def test_needs_no_credential_and_points_to_the_docs_console_and_version(self, client):
        for path in ("/", "/v1"):
            response = await client.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-type"] == "application/json"
            assert response.json() == self.INDEX

    async def test_each_place_it_names_answers(self, client):
        assert (await client.get("/docs")).status_code == 200
        assert (await client.get("/v1/version")).json() == {"version": "2.72.0"}
        console = await client.get("/console", follow_redirects=False)
        assert console.status_code == 303  # to its sign-in, without a session
        assert console.headers["location"] == "/console/login?next=/console"

    async def test_refuses_unknown_query_parameters_and_other_methods(self, client):
        response = await client.get("/v1?x=1")
        assert response.status_code == 400
        assert response.json() == {"errors": ["x: unknown query parameter"]}
        refused = await client.post("/")
        assert refused.status_code == 405 and refused.headers["allow"] == "GET"

    async def test_is_documented_as_open(self, app):
        paths = app.openapi()["paths"]
        for path in ("/", "/v1"):
            operation = paths[path]["get"]
            assert "security" not in operation
            assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ServiceIndex"
            }


class TestConstantAnswers:
    """The health check's answer is the route's own, kept from its first 200."""

    @staticmethod
    def app_answering(*statuses: int) -> tuple[ConstantAnswers, list[str]]:
        calls: list[str] = []
        answers = iter(statuses)

        async def route(scope: dict, receive: object, send: object) -> None:
            calls.append(scope["path"] + ("?" + scope["query_string"].decode()))
            scope["endpoint"] = route
            body = f'{{"n":{len(calls)}}}'.encode()
            await send({"type": "http.response.start", "status": next(answers), "headers": []})
            await send({"type": "http.response.body", "body": body})

        return ConstantAnswers(route, frozenset({"/v1/version"})), calls

    @staticmethod
    async def get(app: ConstantAnswers, path: str, query: bytes = b"") -> tuple[int, bytes, object]:
        sent: list[dict] = []
        scope = {"type": "http", "method": "GET", "path": path, "query_string": query}

        async def send(message: dict) -> None:
            sent.append(message)

        await app(scope, None, send)
        return sent[0]["status"], sent[1]["body"], scope.get("endpoint")

    async def test_the_first_answer_is_the_routes_and_is_kept(self):
        app, calls = self.app_answering(200, 200)
        first = await self.get(app, "/v1/version")
        again = await self.get(app, "/v1/version")
        assert first == again and first[:2] == (200, b'{"n":1}')
        assert again[2] is not None  # the endpoint routing chose, for the metrics' label
        assert calls == ["/v1/version?"]

    async def test_a_failed_answer_is_not_kept(self):
        app, calls = self.app_answering(503, 200, 200)
        assert (await self.get(app, "/v1/version"))[0] == 503
        assert (await self.get(app, "/v1/version"))[:2] == (200, b'{"n":2}')
        assert (await self.get(app, "/v1/version"))[:2] == (200, b'{"n":2}')
        assert len(calls) == 2

    async def test_other_requests_are_routed(self):
        app, calls = self.app_answering(200, 200, 200, 200)
        await self.get(app, "/v1/version")
        await self.get(app, "/v1/version", b"probe=1")
        await self.get(app, "/v1/other")
        await self.get(app, "/v1/other")
        assert calls == ["/v1/version?", "/v1/version?probe=1", "/v1/other?", "/v1/other?"]
