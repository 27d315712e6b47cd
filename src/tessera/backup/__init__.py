"""Backups (``tessera backup create|verify|restore``): a consistent copy of the database taken
while it serves and writes, checked with the key ring, and restored into an empty database.

A backup is a directory of its own, written once (docs/operations.md, Backups)::

    PATH/
      tessera.sqlite3 | tessera.pgdump   the data: a SQLite database file (the online backup
                                         API), or pg_dump's custom format (PostgreSQL)
      manifest.json                      written last: a directory without one is no backup

The manifest (``schemas.Manifest``) says what the data file holds, read in the snapshot it was
taken from: its schema's Alembic revision, each table's rows, the ids of the keys its sealed
secrets need (``TESSERA_SECRET_KEYS`` must hold each, and the backups must not hold the ring);
and its backend, time, size and SHA-256.

``service``: create, verify, restore; ``repository``: what a backup's contents are read with;
``schemas``: the manifest and what the commands report; ``cli``: the commands. The backends'
tools (the SQLite backup API, pg_dump, pg_restore) are ``tessera.db.dumps``'.
"""
