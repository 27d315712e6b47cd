from fastapi.routing import APIRoute, iter_route_contexts

from tessera.api import OPEN_ROUTES
from tests.test_security import READ_POSTS


class TestOpenApi:
    async def test_documents_every_route_with_bodies_and_the_security_schemes(self, client, app):
        spec = (await client.get("/openapi.json")).json()
        assert spec["info"]["version"] == "2.72.0"
        assert spec["components"]["securitySchemes"] == {
            "ApiKey": {
                "type": "apiKey",
                "in": "header",
                "name": "x-api-key",
                "description": spec["components"]["securitySchemes"]["ApiKey"]["description"],
            },
            "BearerApiKey": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "API key (tsk_...)",
                "description": spec["components"]["securitySchemes"]["BearerApiKey"]["description"],
            },
            "BearerJWT": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
                "description": spec["components"]["securitySchemes"]["BearerJWT"]["description"],
            },
        }
        documented = 0
        for route in iter_route_contexts(app.routes):
            if not isinstance(route.original_route, APIRoute):
                continue
            if not route.original_route.include_in_schema:  # a 405 of a concrete path (legacy)
                continue
            for method in route.methods:
                operation = spec["paths"][route.path][method.lower()]
                documented += 1
                success = [s for s in operation["responses"] if s.startswith("2")]
                assert success, (method, route.path)
                if (method, route.path) in OPEN_ROUTES:
                    assert "security" not in operation
                    continue
                assert operation["security"] == [
                    {"ApiKey": []},
                    {"BearerApiKey": []},
                    {"BearerJWT": []},
                ]
                errors = operation["responses"]
                assert errors["401"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorMessage"
                }
                if "requestBody" in operation or operation.get("parameters"):
                    assert errors["400"]["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/ErrorList"
                    }, (method, route.path)
                if method != "GET" and route.path not in READ_POSTS:
                    assert "403" in errors, (method, route.path)
        assert documented >= 27

    async def test_docs_render(self, client):
        response = await client.get("/docs")
        assert response.status_code == 200 and "swagger-ui" in response.text

    async def test_documents_the_change_feed_and_the_webhooks_it_sends(self, client):
        spec = (await client.get("/openapi.json")).json()
        changes = spec["paths"]["/v1/changes"]["get"]
        assert {p["name"] for p in changes["parameters"]} == {"after", "limit"}
        assert changes["responses"]["200"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ChangeList"
        }
        assert set(spec["paths"]["/v1/webhooks/{id}"]) == {"get", "patch", "delete"}
        created = spec["components"]["schemas"]["WebhookCreated"]
        assert "secret" in created["required"]
        assert "secret" not in spec["components"]["schemas"]["WebhookRead"]["properties"]
        # What an endpoint receives: the event and the three Standard Webhooks headers.
        delivery = spec["webhooks"]["change"]["post"]
        assert {p["name"] for p in delivery["parameters"] if p["in"] == "header"} == {
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
        }
        body = delivery["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/ChangeRead"}
        event_types = spec["components"]["schemas"]["EventType"]["enum"]
        assert len(event_types) == 26
        assert {"nft.drift_found", "ticket.reissued", "checkin.displaced", "mail.failed"} <= set(
            event_types
        )
        assert {"waiting_list.offered", "waiting_list.claimed", "waiting_list.expired"} <= set(
            event_types
        )
