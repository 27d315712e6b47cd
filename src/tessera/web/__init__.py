"""The HTTP machinery: how a request becomes an endpoint call and its answer. Every route of
Tessera goes through FastAPI and Starlette; four pieces here take over parts of their work on
the paths every request walks, each because a profile showed that part costing more than the
answer (the before/after figures are in bench/README.md, "Why it is fast"), each held equal to
the framework by tests that compare both ways:

- ``routing``: ``RouteIndex``, a Starlette route at the head of the app's routes that tries, in
  the app's order, only the routes whose templates can match the path. It replaces Starlette's
  try-every-route loop, in which a route near the end of the list spent more time being routed
  than answered. Held equal by tests/test_routing.py (the route chosen, 404s, 405s and
  redirects as Starlette's).
- ``handlers``: ``PlainRoute``, an ``APIRoute`` whose handler reads a plain endpoint's
  signature once (request, path parameters, one query model, one JSON body, dependencies of the
  request alone) and validates each input with pydantic as FastAPI does. It replaces FastAPI's
  general request handler, which re-solves every dependency on every request, a quarter of a
  read's time. Every other route, and every request under dependency overrides or
  OpenTelemetry, keeps FastAPI's handler. Held equal by tests/test_handlers.py (the same
  requests through both, answers compared byte for byte).
- ``render``: ``Renderer``, an answer encoded once from its rows through the response model
  (orjson; keys, aliases, exclusions and computed fields as pydantic writes them). It replaces
  FastAPI's validate-then-serialize of the returned object, which a read's rows, already what
  the schema describes, do not need. Held equal by tests/test_render.py (every response model
  it takes, on generated rows).
- ``routes``: the route classes. ``ProjectRoute`` (a ``PlainRoute``) reads who may call it
  from the endpoint's signature (one ``Access`` alias: ``ReadAccess``, ``WriteAccess``,
  ``DoorReadAccess``, ``DoorWriteAccess``) and checks it before the body is read, whichever
  handler answers; ``IdempotentRoute`` keeps a write's answer with its ``Idempotency-Key``.
  tests/test_security.py walks every route.

And what every request passes through: ``middleware`` (the request id, the body limit, the
access log, the metrics; pure ASGI, as Starlette's ``BaseHTTPMiddleware`` costs a task a
request), ``errors`` (exceptions as answers, in the spec's two shapes), ``server`` (uvicorn with
the limits a slow or greedy client cannot pass), and the pages' share: ``pages``, ``docs``
(Swagger UI from the package), ``urls`` (the public base URL).
"""
