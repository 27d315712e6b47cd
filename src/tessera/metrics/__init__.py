"""Prometheus metrics at ``GET /metrics``: requests and their latency by route template, the
database pool, the job queue, the project wallets' balances, the NFT drift and the chain work.

- ``http``: the request counter and latency histogram, fed by ``RequestContextMiddleware``.
- ``process``: where each process keeps its figures (in memory, or in files shared by
  ``tessera serve --workers N``), and the pool gauges.
- ``counts``: the counters and histograms the workers add to in the database.
- ``service``: what a scrape reads from the database, and the job worker's balance chore.
- ``router``: the endpoint and who may read it (``TESSERA_METRICS_TOKEN``, else loopback only).
"""
