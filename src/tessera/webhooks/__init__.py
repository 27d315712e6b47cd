"""Webhooks: a project's endpoints (``service``, ``router``), where their URLs may point
(``addresses``), and their delivery by the job worker (``dispatcher``), signed per the Standard
Webhooks specification, from the change feed (``tessera.changes``)."""
