"""Idempotent writes: a POST, PUT, PATCH or DELETE sent with ``Idempotency-Key`` is done once.

The first request with a key (in its scope: the write credential's project, or the claim link
of a public claim) is recorded with a fingerprint of its method, path, query and body, then
runs; its answer (status, headers, body) is stored with the key for
``TESSERA_IDEMPOTENCY_TTL_SECONDS`` before it is sent, so that a retry made the moment the first
answer arrives finds it. A retry with the same key and the same request gets that answer again,
with ``Idempotent-Replayed: true``, and changes nothing. The same key with another request is
422; while the first still runs, 409. The record is in the database, so this holds across
processes; of many requests sent at once with one key, one runs.

It wraps a route's handler (``idempotent``), so the route has been chosen first: a method the
path does not answer is a 405, whatever the key. An answer of 500 or more, and a 429, are not
kept: the request did nothing, and a retry with the key runs again. A request that never
finishes (its process died) leaves its key running for ``RUNNING_SECONDS``; after that a retry
runs again. The answer is stored once the use-case has committed, so a process dying between
the two leaves the key to be taken over that way too: the window in which a retry could do the
work twice is that moment, not the network's.

A request whose scope cannot be told (no valid write credential, an unknown claim link) is not
recorded: it is answered, or refused, as usual.

``service``: the records; ``schemas``: whose keys and the kept answer; ``repository``: their
statements. The route class that keeps a write's answer is ``tessera.web.routes.IdempotentRoute``.
"""
