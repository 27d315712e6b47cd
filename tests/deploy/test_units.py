"""deploy/'s files hold together: the environment file names settings only and, its
placeholders filled in, is a production configuration that ``tessera-admin`` runs the CLI
with; the systemd units start commands the CLI has, with the documented file and user."""

import configparser
import os
import pwd
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tessera.cli import app
from tessera.config import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNITS = ("tessera-api.service", "tessera-worker.service")


def environment(text: str) -> dict[str, str]:
    """NAME=value lines, as systemd's EnvironmentFile reads them (a value may be quoted)."""
    found = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            found[name] = shlex.split(value)[0] if value else ""
    return found


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string((DEPLOY / name).read_text(encoding="utf-8"))
    return parser


def test_the_environment_file_names_settings_only() -> None:
    names = environment((DEPLOY / "tessera.env.example").read_text(encoding="utf-8"))
    known = {f"TESSERA_{field.upper()}" for field in Settings.model_fields}
    assert set(names) - known == set()
    # What docs/deploy.md says production needs is there.
    for needed in ("ENV", "DATABASE_URL", "SECRET_KEYS", "HASH_KEY", "PUBLIC_URL"):
        assert f"TESSERA_{needed}" in names
    assert names["TESSERA_FORWARDED_ALLOW_IPS"] == "127.0.0.1"
    assert names["TESSERA_WORKER_IN_PROCESS"] == "false"


def filled_in(tmp_path: Path) -> Path:
    """tessera.env.example with its placeholders replaced by what an operator would write."""
    text = (DEPLOY / "tessera.env.example").read_text(encoding="utf-8")
    values = {
        "TESSERA_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'tessera.db'}",
        "TESSERA_SECRET_KEYS": "k1:" + "QUJD" * 10 + "QUI=",  # 32 bytes
        "TESSERA_HASH_KEY": "a-real-hash-key-" + "x" * 40,
        "TESSERA_METRICS_TOKEN": "a-metrics-token-of-some-length",
        "TESSERA_CHAIN_ASSETHUB_RPC_URL": "wss://rpc.example.com",
    }
    lines = []
    for line in text.splitlines():
        name = line.partition("=")[0]
        lines.append(f"{name}={values[name]}" if name in values else line)
    filled = "\n".join(lines) + "\n"
    assert "CHANGE-ME" not in filled.replace("CHANGE-ME-at-least", "")
    path = tmp_path / "tessera.env"
    path.write_text(filled, encoding="utf-8")
    return path


def test_tessera_admin_runs_the_cli_with_the_environment_file(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
    env |= {
        "TESSERA_ENV_FILE": str(filled_in(tmp_path)),
        "TESSERA_BIN": str(Path(sys.executable).parent / "tessera"),
        "TESSERA_RUN_AS": pwd.getpwuid(os.getuid()).pw_name,
        "TESSERA_WORKING_DIRECTORY": str(tmp_path),
    }

    def admin(*args: str) -> subprocess.CompletedProcess[str]:
        command = ["sh", str(DEPLOY / "tessera-admin"), *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    upgraded = admin("db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    # TESSERA_ENV=production: it starts only because every placeholder secret was replaced.
    created = admin("project", "create", "--name", "Harbour Festival")
    assert created.returncode == 0, created.stderr
    assert '"api_key"' in created.stdout
    assert (tmp_path / "tessera.db").exists()


@pytest.mark.parametrize("name", UNITS)
def test_a_unit_starts_a_command_of_the_cli(name: str) -> None:
    service = unit(name)["Service"]
    assert service["EnvironmentFile"] == "/etc/tessera/tessera.env"
    assert (service["User"], service["Group"]) == ("tessera", "tessera")
    assert service["ReadWritePaths"] == service["WorkingDirectory"] == "/var/lib/tessera"
    program, *args = shlex.split(service["ExecStart"])
    assert program == "/opt/tessera/venv/bin/tessera"
    # The options parse (an unknown one fails even with --help).
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert args[0] == {"tessera-api.service": "serve", "tessera-worker.service": "worker"}[name]
