"""Schemathesis against Tessera's own /openapi.json, on a real server and the suite's backend.

Every check (no 5xx, responses match the schema, schema-valid requests accepted and invalid
ones refused, Allow headers, links followed by the stateful phase, ...), a fixed seed and a
bounded number of examples: CI runs this in well under a minute per backend. `make fuzz` runs
it longer (``TESSERA_FUZZ_EXAMPLES``, ``TESSERA_FUZZ_SEED``) and prints the summary.

The cross-field rules that JSON Schema cannot state are in tests/fuzz/hooks.py.
"""

import os
import re
import subprocess
from pathlib import Path

from tests.conftest import BACKEND
from tests.serving import BIN, ROOT, fresh_database, serve, settings_env, tessera

EXAMPLES = int(os.environ.get("TESSERA_FUZZ_EXAMPLES", "25"))
SEED = os.environ.get("TESSERA_FUZZ_SEED", "1")


def test_schemathesis_finds_nothing(tmp_path: Path) -> None:
    env = settings_env(
        fresh_database(BACKEND, tmp_path, f"fuzz_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"),
        # GET /v1/health/ready wants a live worker (with no chain configured, no job is queued).
        worker_in_process=True,
        # A slow fuzzed request must not look like a slow client.
        header_timeout_seconds=60,
        # Fuzzed webhooks point at a closed port on loopback (tests/fuzz/hooks.py).
        webhooks_allow_private=True,
    )
    key = tessera("project", "create", "--name", "Fuzz", env=env)["api_key"]
    with serve(env, tmp_path / "server.log") as url:
        done = subprocess.run(
            [
                str(BIN / "schemathesis"),
                "run",
                f"{url}/openapi.json",
                "--checks",
                "all",
                "--header",
                f"x-api-key: {key}",
                "--max-examples",
                str(EXAMPLES),
                "--seed",
                SEED,
                # One worker: two threads parsing lambdas at once trip CPython 3.11's AST
                # constructor ("AST constructor recursion depth mismatch",
                # python/cpython#106905), a runtime error on a loaded machine.
                "--workers",
                "1",
                "--generation-database",
                "none",
                "--request-timeout",
                "30",
                "--no-color",
            ],
            cwd=ROOT,
            env=env | {"SCHEMATHESIS_HOOKS": "tests.fuzz.hooks", "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=900,
        )
    report = done.stdout + done.stderr
    (tmp_path / "schemathesis.txt").write_text(report)
    summary = report[report.rfind("SUMMARY") :]
    print(summary)
    # What went wrong comes first in the report (ERRORS, FAILURES), before the warnings.
    assert done.returncode == 0, report.partition("WARNINGS")[0][-20000:]
    generated = re.search(r"(\d+) generated", summary)
    assert generated and int(generated.group(1)) >= 20 * EXAMPLES, summary
    assert "Stateful" in summary and "❌" not in summary, summary
