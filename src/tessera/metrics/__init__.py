"""Prometheus metrics at ``GET /metrics``: requests and their latency by route template, the
database pool, the job queue, the project wallets' balances, the NFT drift and the chain work.

What the processes count as they work is ``tessera.instruments``'; this package reads it and
the domains for a scrape:

- ``service``: what a scrape reads from the database, and the job worker's balance chore.
- ``repository``: its statements.
- ``router``: the endpoint and who may read it (``TESSERA_METRICS_TOKEN``, else loopback only).
"""
