"""The wallets' settings: each wallet's go together (some without the others refuse to start,
naming the missing ones), and their files are read and checked at start-up (``Wallets.load``):
a file that is missing, not PEM, locked by another password, not the certificate's key, or a
WWDR certificate that did not issue the pass certificate is named by its setting, as is a pass
type id or team the certificate is not for; no key or password is ever part of the message or
of the settings' dump."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tessera.config import Settings
from tessera.main import create_app
from tessera.passes.apple import WalletSettingsInvalid
from tessera.passes.service import Wallets
from tests.passes.ca import ISSUER_ID, KEY_PASSWORD, PASS_TYPE_ID, TEAM_ID, StandInCa


def settings_with(**wallets: object) -> Settings:
    return Settings(env="test", database_url="sqlite+aiosqlite:///:memory:", **wallets)


def refusal(**wallets: object) -> str:
    with pytest.raises(ValidationError) as refused:
        settings_with(**wallets)
    [error] = refused.value.errors()
    return str(error["msg"])


class TestTogether:
    def test_none_is_no_wallet(self):
        settings = settings_with()
        assert settings.apple_wallet is False and settings.google_wallet is False
        assert Wallets.load(settings) == Wallets(None, None)

    def test_some_apple_settings_name_the_missing_ones(self):
        message = refusal(apple_pass_type_id=PASS_TYPE_ID, apple_team_id=TEAM_ID)
        assert message == (
            "Value error, TESSERA_APPLE_PASS_CERTIFICATE, TESSERA_APPLE_PASS_KEY, "
            "TESSERA_APPLE_WWDR_CERTIFICATE missing: wallet settings go together"
        )

    def test_the_key_password_alone_is_no_wallet(self):
        settings = settings_with(apple_pass_key_password="x")
        assert settings.apple_wallet is False

    def test_either_google_setting_alone_names_the_other(self, tmp_path: Path):
        message = refusal(google_wallet_key_file=tmp_path / "key.json")
        assert message == (
            "Value error, TESSERA_GOOGLE_WALLET_ISSUER_ID missing: wallet settings go together"
        )
        message = refusal(google_wallet_issuer_id=ISSUER_ID)
        assert message == (
            "Value error, TESSERA_GOOGLE_WALLET_KEY_FILE missing: wallet settings go together"
        )

    def test_a_refusal_does_not_echo_the_password(self):
        with pytest.raises(ValidationError) as refused:
            settings_with(apple_pass_type_id=PASS_TYPE_ID, apple_pass_key_password=KEY_PASSWORD)
        assert "TESSERA_APPLE_TEAM_ID" in str(refused.value)
        assert KEY_PASSWORD not in str(refused.value)

    @pytest.mark.parametrize(
        ("name", "value"),
        [
            ("apple_pass_type_id", "com.example.tickets"),
            ("apple_team_id", "short"),
            ("google_wallet_issuer_id", "not-digits"),
        ],
    )
    def test_malformed_ids(self, stand_in_ca: StandInCa, name: str, value: str):
        with pytest.raises(ValidationError) as refused:
            settings_with(**(stand_in_ca.settings() | {name: value}))
        assert refused.value.errors()[0]["loc"] == (name,)

    def test_both_wallets_load(self, stand_in_ca: StandInCa):
        settings = settings_with(**stand_in_ca.settings())
        assert settings.apple_wallet is True and settings.google_wallet is True
        wallets = Wallets.load(settings)
        assert wallets.apple is not None and wallets.apple.pass_type_id == PASS_TYPE_ID
        assert wallets.google is not None and wallets.google.client_email.endswith(".com")
        # The password is a secret: masked in every rendering of the settings.
        assert KEY_PASSWORD not in repr(settings)
        assert KEY_PASSWORD not in settings.model_dump_json()


class TestFiles:
    def refused(self, stand_in_ca: StandInCa, **changed: object) -> str:
        settings = settings_with(**(stand_in_ca.settings() | changed))
        with pytest.raises(WalletSettingsInvalid) as refused:
            create_app(settings)
        message = str(refused.value)
        assert KEY_PASSWORD not in message and "-----" not in message
        return message

    def test_a_key_that_is_not_the_certificates(self, stand_in_ca: StandInCa):
        message = self.refused(
            stand_in_ca, apple_pass_key=stand_in_ca.other_key, apple_pass_key_password=None
        )
        assert message == (
            "TESSERA_APPLE_PASS_KEY is not the key of TESSERA_APPLE_PASS_CERTIFICATE"
        )

    def test_a_wrong_password(self, stand_in_ca: StandInCa):
        message = self.refused(stand_in_ca, apple_pass_key_password="not-the-password")
        assert message == (
            f"TESSERA_APPLE_PASS_KEY: {stand_in_ca.key}: not a PEM private key this password "
            "opens (ValueError)"
        )

    def test_no_password_for_a_locked_key(self, stand_in_ca: StandInCa):
        message = self.refused(stand_in_ca, apple_pass_key_password=None)
        assert message.startswith(f"TESSERA_APPLE_PASS_KEY: {stand_in_ca.key}: not a PEM")

    def test_a_missing_certificate(self, stand_in_ca: StandInCa, tmp_path: Path):
        missing = tmp_path / "nowhere.pem"
        message = self.refused(stand_in_ca, apple_pass_certificate=missing)
        assert message == (
            f"TESSERA_APPLE_PASS_CERTIFICATE: {missing}: not a PEM certificate (FileNotFoundError)"
        )

    def test_a_wwdr_that_is_not_pem(self, stand_in_ca: StandInCa, tmp_path: Path):
        der = tmp_path / "wwdr.cer"
        der.write_bytes(b"\x30\x82\x01\x00not pem at all")
        message = self.refused(stand_in_ca, apple_wwdr_certificate=der)
        assert (
            message == f"TESSERA_APPLE_WWDR_CERTIFICATE: {der}: not a PEM certificate (ValueError)"
        )

    def test_a_wwdr_that_did_not_issue_the_certificate(self, stand_in_ca: StandInCa):
        # The root issued the intermediate, not the pass certificate: as a WWDR of the wrong
        # generation, the passes it would carry are refused by every iPhone.
        message = self.refused(stand_in_ca, apple_wwdr_certificate=stand_in_ca.root)
        assert message == (
            f"TESSERA_APPLE_WWDR_CERTIFICATE: {stand_in_ca.root}: did not issue "
            "TESSERA_APPLE_PASS_CERTIFICATE"
        )

    def test_a_pass_type_id_that_is_not_the_certificates(self, stand_in_ca: StandInCa):
        message = self.refused(stand_in_ca, apple_pass_type_id="pass.test.someone.else")
        assert message == (
            "TESSERA_APPLE_PASS_TYPE_ID: pass.test.someone.else is not the one of "
            f"TESSERA_APPLE_PASS_CERTIFICATE ({PASS_TYPE_ID})"
        )

    def test_a_team_that_is_not_the_certificates(self, stand_in_ca: StandInCa):
        message = self.refused(stand_in_ca, apple_team_id="OTHERTEAM1")
        assert message == (
            f"TESSERA_APPLE_TEAM_ID: OTHERTEAM1 is not the one of TESSERA_APPLE_PASS_CERTIFICATE "
            f"({TEAM_ID})"
        )

    @pytest.mark.parametrize(
        "content",
        [
            "not json",
            json.dumps({"client_email": "a@b.c"}),
            json.dumps({"client_email": "a@b.c", "private_key": "-----BEGIN nothing"}),
            json.dumps(["a list"]),
        ],
    )
    def test_a_google_key_file_that_is_not_a_service_accounts(
        self, stand_in_ca: StandInCa, tmp_path: Path, content: str
    ):
        key_file = tmp_path / "key.json"
        key_file.write_text(content)
        message = self.refused(stand_in_ca, google_wallet_key_file=key_file)
        assert message.startswith(
            f"TESSERA_GOOGLE_WALLET_KEY_FILE: {key_file}: not a service account's JSON key ("
        )
