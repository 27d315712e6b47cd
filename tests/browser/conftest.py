"""Debian's Chromium (``/usr/bin/chromium``), headless, driven by Playwright; never a browser
build of Playwright's own. axe-core is installed once from npm into .cache/axe.

Without the browser (or npm, for axe) these tests skip with the reason; with
TESSERA_REQUIRE_BROWSER=1 (CI) they fail instead.
"""

import fcntl
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import NoReturn

import pytest
from playwright.async_api import Browser, async_playwright

from tests.serving import ROOT

CHROMIUM = Path("/usr/bin/chromium")
# Quiet and offline: no update, sync or field-trial traffic leaves the machine.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
AXE = "axe-core@4.14.1"
AXE_CACHE = ROOT / ".cache" / "axe"
AXE_SCRIPT = AXE_CACHE / "node_modules" / "axe-core" / "axe.min.js"


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("TESSERA_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TESSERA_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is not installed: `apt-get install chromium`")
    return CHROMIUM


@pytest.fixture(scope="session")
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest.fixture(scope="session")
def axe_script() -> Path:
    """axe.min.js, installed from npm on first use (one xdist worker at a time)."""
    if not AXE_SCRIPT.exists():
        npm = shutil.which("npm")
        if npm is None:
            unavailable(f"npm (Node.js) is needed to install {AXE} into {AXE_CACHE}")
        AXE_CACHE.mkdir(parents=True, exist_ok=True)
        with (AXE_CACHE.parent / "axe.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not AXE_SCRIPT.exists():
                quiet = ["--no-audit", "--no-fund", "--loglevel=error"]
                subprocess.run(
                    [npm, "install", *quiet, "--prefix", str(AXE_CACHE), AXE],
                    check=True,
                    timeout=300,
                )
    return AXE_SCRIPT
