"""The database schema's migrations (Alembic), shipped inside the package.

``tessera db upgrade`` and the tests call ``upgrade``; it needs no alembic.ini, so it works from
an installed wheel in any directory. Developers make new revisions from the checkout with
``alembic revision --autogenerate -m "..."`` (alembic.ini at the root points here).
"""

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

HERE = Path(__file__).resolve().parent


def config(database_url: str) -> Config:
    alembic = Config()
    alembic.set_main_option("script_location", str(HERE))
    alembic.set_main_option("file_template", "%%(year)d-%%(month).2d-%%(day).2d_%%(slug)s")
    alembic.attributes["database_url"] = database_url
    return alembic


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(config(database_url), revision)


def head() -> str:
    """The revision the package's models are at: what an up-to-date database records."""
    revision = ScriptDirectory(str(HERE)).get_current_head()  # refuses several heads
    assert revision is not None
    return revision


def revisions() -> frozenset[str]:
    """Every revision the package knows."""
    return frozenset(script.revision for script in ScriptDirectory(str(HERE)).walk_revisions())
