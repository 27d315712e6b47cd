"""The documentation holds to the code: docs/settings.md is what ``tessera.docs_settings``
renders from the Settings class."""

from pathlib import Path

import pytest

from tessera import docs_settings
from tessera.config import Settings

ROOT = Path(__file__).resolve().parents[1]


class TestSettingsPage:
    def test_is_what_the_settings_class_renders(self):
        page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
        assert page == docs_settings.render(), "docs/settings.md is out of date: run `make docs`"

    def test_has_a_row_for_every_setting_with_its_default(self):
        rows = docs_settings.render().splitlines()
        assert "| `TESSERA_PORT` | `8000` | integer, at least 1, at most 65535 | " in "\n".join(
            rows
        )
        for name in Settings.model_fields:
            assert sum(row.startswith(f"| `TESSERA_{name.upper()}` |") for row in rows) == 1

    def test_a_setting_without_a_description_is_refused(self, monkeypatch):
        monkeypatch.setattr(Settings.model_fields["port"], "description", None)
        with pytest.raises(ValueError, match=r"Settings\.port has no docstring"):
            docs_settings.render()
