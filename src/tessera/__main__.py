"""``python -m tessera``: the ``tessera`` command."""

from tessera.cli import app

app(prog_name="tessera")
