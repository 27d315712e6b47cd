"""Each project's Ed25519 keys for its tickets' signed secrets (``tessera.ticket_keys.codes``), so
that a door checks a secret offline with the public half it synced.

``service``: the signer (made on first use, the private key sealed), rotation and retirement;
``repository``: their statements; ``schemas``: the keys as the sync and the CLI show them.
"""
