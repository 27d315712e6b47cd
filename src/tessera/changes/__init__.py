"""The change feed: every state change a client cares about, written as a row of ``changes`` in
the transaction that made it (``outbox.record``), read in commit order by ``GET /v1/changes``
(``feed``) and delivered to the project's webhooks (``tessera.webhooks``)."""
