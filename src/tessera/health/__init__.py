"""Readiness: ``GET /v1/health/ready`` says whether this process can serve, check by check.

``GET /v1/version`` stays the liveness check (the process answers). Readiness asks about what
the process depends on: the database answers, its schema is the one this code expects, some job
worker is alive (in this process or another: tessera.jobs.heartbeat), and every configured chain
answers a read. The checks run concurrently, each within ``chain_request_timeout_seconds``, so
the answer comes within that time whatever hangs.

The route is open (an orchestrator's probe carries no credential), so a check's ``detail`` is in
words of our own: never a URL, a host or a driver's message, which may carry a secret (an RPC
provider's key in its URL) or map the network. The cause goes to the log.

- ``readiness``: the checks, and ``Readiness``, which runs them for one process;
- ``router``: the route.
"""
