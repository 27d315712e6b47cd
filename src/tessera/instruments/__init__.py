"""What the processes count as they work, for ``GET /metrics`` (tessera.metrics) to show.

- ``http``: the request counter and latency histogram, fed by the web middleware.
- ``process``: where each process keeps its figures (in memory, or in files shared by
  ``tessera serve --workers N``), and the pool gauges.
- ``counts``: the counters and histograms the workers add to in the database, in the
  transaction of what they count.

It reads no domain: the packages that count (the middleware, the minting, the ledger of
extrinsics) sit above it, and ``tessera.metrics``, which reads the domains for a scrape, too.
"""
