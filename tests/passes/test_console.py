"""The console's project page says which phone wallets the server is configured for (with the
pass type id and the issuer id), names the settings of those it is not, and whether the passes
show the project's logo or Tessera's mark."""

import io
import re

from PIL import Image

from tessera.db import database_of
from tessera.passes.service import set_logo
from tests.claims.markup import parse
from tests.console.conftest import owner_console
from tests.passes.ca import ISSUER_ID, PASS_TYPE_ID


async def wallets_shown(app, tenant) -> dict[str, str]:
    """Each line of the section as a browser shows its text."""
    console = await owner_console(app, tenant)
    try:
        response = await console.get(f"/console/projects/{tenant.project_id}")
        assert response.status_code == 200, response.text
    finally:
        await console.http.aclose()
    parse(response.text).one("ul", id="phone-wallets")  # well formed, and there
    return {
        line: re.sub(r"<[^>]+>", "", found.group(1))
        for line in ("apple-wallet", "google-wallet", "pass-logo")
        if (found := re.search(f'<li id="{line}">(.*?)</li>', response.text))
    }


class TestPhoneWallets:
    async def test_configured(self, wallet_app, tenant):
        shown = await wallets_shown(wallet_app, tenant)
        assert shown["apple-wallet"] == (
            f"Apple Wallet: configured, pass type {PASS_TYPE_ID}: each ticket's page and email "
            "link its pass."
        )
        assert shown["google-wallet"] == (
            f"Google Wallet: configured, issuer {ISSUER_ID}: each ticket's page and email link it."
        )
        assert shown["pass-logo"] == "The passes show Tessera's mark (tessera project set-logo)."

    async def test_not_configured(self, app, tenant):
        shown = await wallets_shown(app, tenant)
        assert shown["apple-wallet"] == (
            "Apple Wallet: not configured: the server needs TESSERA_APPLE_PASS_TYPE_ID, "
            "TESSERA_APPLE_TEAM_ID, TESSERA_APPLE_PASS_CERTIFICATE, TESSERA_APPLE_PASS_KEY and "
            "TESSERA_APPLE_WWDR_CERTIFICATE."
        )
        assert shown["google-wallet"] == (
            "Google Wallet: not configured: the server needs TESSERA_GOOGLE_WALLET_ISSUER_ID and "
            "TESSERA_GOOGLE_WALLET_KEY_FILE."
        )
        assert shown["pass-logo"] == "The passes show Tessera's mark (tessera project set-logo)."

    async def test_the_projects_logo(self, wallet_app, tenant):
        logo = io.BytesIO()
        Image.new("RGB", (64, 64), (0, 0, 200)).save(logo, "PNG")
        await set_logo(database_of(wallet_app), project_id=tenant.project_id, png=logo.getvalue())
        shown = await wallets_shown(wallet_app, tenant)
        assert shown["pass-logo"] == (
            "The passes show the project's logo (tessera project set-logo)."
        )
