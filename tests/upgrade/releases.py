"""The earlier releases a database is upgraded from, and how to run one as a real process.

Each release is pinned by its full commit and the migration head its schema is at. A release
adds its pin at the end of ``RELEASES``: its commit must be on main's history, which CI clones
whole. The newest pin is the release in service while the next one is rolled out: its
processes must keep serving on the upgraded schema (docs/upgrades.md), and the migrations after
its head must only expand (``test_expand_only.py``).

A release runs from its own sources, taken with ``git archive`` from the repository the tests
run in, first on the import path (``PYTHONPATH``): the process checks at start-up that the
``tessera`` it imported is the release's, and stops otherwise. It runs on its own locked
dependencies, in ``.venv-previous`` (made by ``make test``: this venv's packages, seen through a
``.pth`` line, plus what the release's ``requirements.lock`` pins otherwise; the release of
issue 43 still needed ``limits``). ``python -m tests.upgrade.releases`` prints the commit.
"""

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.serving import ROOT


class Release(NamedTuple):
    commit: str
    head: str
    """The revision its migrations end at: the schema its databases are at."""


RELEASES = (
    # Issue 43 starts from here: tickets at the door, offline doors, phone wallets.
    Release(commit="0cbf2dbb29e45ab8c6947df68108ae64ab9d0aa1", head="0024"),
)
PREVIOUS = RELEASES[-1]

# The first statement of every process of a release: the package it imported must be the
# release's own sources (argv[1], removed before the CLI reads its arguments).
_CHECKED_START = (
    "import pathlib, sys, tessera\n"
    "sources = pathlib.Path(sys.argv.pop(1)).resolve()\n"
    "imported = pathlib.Path(tessera.__file__).resolve()\n"
    "if not imported.is_relative_to(sources):\n"
    "    sys.exit(f'tessera imported from {imported}, not from the release at {sources}')\n"
    "from tessera.cli import app\n"
    "app(prog_name='tessera')\n"
)


def sources_of(release: Release, directory: Path) -> Path:
    """The release's ``src/`` written under ``directory``; a commit the repository lacks fails
    the test (a shallow clone cannot test upgrades), it is never skipped."""
    git = ["git", "-C", str(ROOT)]
    found = subprocess.run(
        [*git, "cat-file", "-e", f"{release.commit}^{{commit}}"], capture_output=True, text=True
    )
    if found.returncode != 0:
        pytest.fail(
            f"release {release.commit} is not in the repository at {ROOT} ({found.stderr.strip()}):"
            " the upgrade tests need main's history (a full clone, not a shallow one)"
        )
    archive = subprocess.run(
        [*git, "archive", "--format=tar", release.commit, "src"], capture_output=True, check=True
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(directory, filter="data")
    return directory / "src"


PREVIOUS_PYTHON = ROOT / ".venv-previous" / "bin" / "python"


def program(sources: Path) -> list[str]:
    """The command line that is the previous release's ``tessera``."""
    if not PREVIOUS_PYTHON.exists():
        pytest.fail(f"{PREVIOUS_PYTHON} is missing: `make .venv-previous/.installed` makes it")
    return [str(PREVIOUS_PYTHON), "-c", _CHECKED_START, str(sources)]


def release_env(sources: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the release's sources first on the import path."""
    path = [str(sources), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return env | {"PYTHONPATH": os.pathsep.join(path)}


def run(command: list[str], *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*command, *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
    return done


def answer(command: list[str], *args: str, env: dict[str, str]) -> dict:
    """A CLI command's JSON answer."""
    return json.loads(run(command, *args, env=env).stdout)


if __name__ == "__main__":
    print(PREVIOUS.commit)
