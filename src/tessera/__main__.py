"""``python -m tessera``: the ``tessera`` command."""

from tessera.cli import app

if __name__ == "__main__":  # not when a test imports every module
    app(prog_name="tessera")
