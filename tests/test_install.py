"""Tessera installed from its wheel works away from the checkout.

The wheel goes into a fresh venv that sees the dev venv's dependencies through a .pth file but not
the editable tessera (the dev venv's own .pth files are not processed from there). Commands run
from an empty directory with a minimal environment: no repo files, no TESSERA_* from the caller,
and a PATH without Node, so nothing can fall back to the checkout or start Chopsticks.
"""

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from tessera import migrations
from tessera.chain.devchain import DEFAULT_SPEC, DEFAULT_SPEC_SHA256
from tessera.models import Base

ROOT = Path(__file__).resolve().parents[1]
DOCS_ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")
# Each path given, from the installed app without a server: [status, content type, size].
FETCH = """
import asyncio, json, sys
import httpx
from tessera.main import create_app

async def main():
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        answers = [await http.get(path) for path in sys.argv[1:]]
    print(json.dumps({
        r.url.path: [r.status_code, r.headers["content-type"], len(r.content)] for r in answers
    }))

asyncio.run(main())
"""


def _run(
    *args: object, ok: bool = True, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if ok:
        assert result.returncode == 0, result.stderr
    return result


def _not_source(directory: str, names: list[str]) -> set[str]:
    # A clean copy to build from: an in-tree build would leave build/ and *.egg-info in the
    # checkout, and setuptools never clears build/lib, so deleted modules would stay in the wheel.
    at_root = Path(directory) == ROOT
    return {
        name
        for name in names
        if name == "__pycache__"
        or name.endswith(".egg-info")
        or (at_root and (name.startswith(".") or name in {"build", "dist"}))
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source") / "tessera"
    shutil.copytree(ROOT, source, ignore=_not_source)
    out = tmp_path_factory.mktemp("wheel")
    _run(
        sys.executable,
        *("-m", "pip", "wheel", "--quiet", "--disable-pip-version-check"),
        *("--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir", out, source),
    )
    (built,) = out.glob("tessera-*.whl")
    return built


@dataclass(frozen=True)
class Installed:
    root: Path
    python: Path
    tessera: Path

    def env(self, **settings: str) -> dict[str, str]:
        """Nothing from the caller's environment: PATH holds only the venv (no node, no npm)."""
        home = self.root / "home"
        home.mkdir(exist_ok=True)
        return {"PATH": str(self.root / "bin"), "HOME": str(home), "LC_ALL": "C.UTF-8", **settings}


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(root)
    target = Installed(root, root / "bin" / "python", root / "bin" / "tessera")
    # The dev venv's pip installs into the new interpreter before the .pth exists, so it sees
    # no other tessera there (and could never touch the dev venv's editable one).
    _run(
        sys.executable,
        *("-m", "pip", "--python", target.python, "install", "--quiet"),
        *("--disable-pip-version-check", "--no-deps", "--no-index", wheel),
    )
    site = _run(
        target.python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"
    ).stdout.strip()
    dev = dict.fromkeys(sysconfig.get_path(kind) for kind in ("purelib", "platlib"))
    (Path(site) / "dev-venv-dependencies.pth").write_text("".join(f"{p}\n" for p in dev))
    return target


@pytest.fixture
def empty_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    return directory


class TestInstalledWheel:
    def test_tessera_is_imported_from_the_wheel(self, installed, empty_dir):
        probe = (
            "import json, sys, sqlalchemy, tessera, tessera.migrations;"
            "print(json.dumps([tessera.__file__, tessera.migrations.__file__,"
            " sqlalchemy.__file__, sys.path]))"
        )
        result = _run(installed.python, "-c", probe, cwd=empty_dir, env=installed.env())
        package, package_migrations, dependency, path = json.loads(result.stdout)
        assert Path(package).is_relative_to(installed.root)
        assert Path(package_migrations).is_relative_to(installed.root)
        assert Path(dependency).is_relative_to(sys.prefix)  # dependencies: the dev venv's
        assert str(ROOT / "src") not in path

    def test_db_upgrade_from_an_empty_directory(self, installed, empty_dir):
        database = empty_dir / "tessera.db"
        env = installed.env(TESSERA_DATABASE_URL=f"sqlite+aiosqlite:///{database}")
        _run(installed.tessera, "db", "upgrade", cwd=empty_dir, env=env)
        with sqlite3.connect(database) as connection:
            rows = connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
            tables = {name for (name,) in rows}
            versions = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        assert {"users", "products", "jobs", "alembic_version"} <= tables
        assert tables == set(Base.metadata.tables) | {"alembic_version"}
        head = ScriptDirectory(str(migrations.HERE)).get_current_head()
        assert versions == [(head,)]

    def test_docs_and_their_assets_are_served(self, installed, empty_dir):
        # Swagger UI's files come from a dependency: read where that is installed.
        paths = ["/docs", *(f"/docs/assets/{name}" for name in DOCS_ASSETS)]
        env = installed.env(TESSERA_DATABASE_URL=f"sqlite+aiosqlite:///{empty_dir / 'unused.db'}")
        fetched = _run(installed.python, "-c", FETCH, *paths, cwd=empty_dir, env=env).stdout
        answers = json.loads(fetched)
        assert {path: status for path, (status, _, _) in answers.items()} == dict.fromkeys(
            paths, 200
        )
        assert answers["/docs"][1] == "text/html; charset=utf-8"
        assert min(size for _, _, size in answers.values()) > 100

    def test_devchain_carries_its_chain_spec(self, installed, empty_dir, tmp_path):
        """The wheel carries the Asset Hub spec: `tessera devchain` unpacks it into its cache
        and then wants npm (none on this PATH) for Chopsticks."""
        cache = tmp_path / "chopsticks"
        env = installed.env(
            TESSERA_DEVCHAIN_CACHE=str(cache),
            TESSERA_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'unused.db'}",
        )
        result = _run(installed.tessera, "devchain", ok=False, cwd=empty_dir, env=env)
        assert (result.returncode, result.stdout, result.stderr) == (
            1,
            "",
            "error: npm (Node.js) is needed to run Chopsticks\n",
        )
        [spec] = cache.iterdir()
        assert spec.name == DEFAULT_SPEC
        assert hashlib.sha256(spec.read_bytes()).hexdigest() == DEFAULT_SPEC_SHA256
        assert list(empty_dir.iterdir()) == []

    def test_the_licence_and_notice_are_in_the_wheel(self, wheel):
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        licensed = {Path(name).name for name in names if ".dist-info/licenses/" in name}
        assert licensed == {"LICENSE", "NOTICE"}
        assert b"License-Expression: Apache-2.0" in metadata
