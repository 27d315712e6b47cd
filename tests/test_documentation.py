"""The documentation holds to the code and to itself: docs/settings.md is what
``tessera.cli.settings_docs`` renders from the Settings class, the README is a front page that links
every page of docs/, and every relative link (and image) in them leads to a file and heading
that exist."""

import re
from pathlib import Path

import pytest

from tessera.cli import settings_docs as docs_settings
from tessera.config import Settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target), the text possibly holding one level of brackets.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without its code: neither a fenced block nor a code span holds links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lowercased, everything but letters,
    digits, underscores, hyphens and spaces dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in ``path``; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    targets = LINK.findall(prose(path.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


class TestLinks:
    @pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
    def test_every_relative_link_leads_to_a_file_and_heading(self, document: Path):
        broken = []
        for target in relative_links(document):
            file, _, anchor = target.partition("#")
            destination = (document.parent / file).resolve() if file else document
            if not destination.is_file():
                broken.append(f"{target}: no file {destination}")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{target}: no heading #{anchor} in {destination.name}")
        assert broken == []

    def test_the_link_reader_sees_links_images_and_anchors(self, tmp_path: Path):
        page = tmp_path / "page.md"
        page.write_text(
            "# At the chain's pace\n## Why `make docs`?\n## Why `make docs`?\n"
            "See [a](other.md#x), ![pic](pic.png) and [`/docs`](http://127.0.0.1:8000/docs);"
            " `[not](a-link.md)`\n```sh\n[nor](this.md)\n```\n"
        )
        assert relative_links(page) == ["other.md#x", "pic.png"]
        assert anchors(page) == {"at-the-chains-pace", "why-make-docs", "why-make-docs-1"}

    def test_every_picture_in_docs_is_shown_somewhere(self):
        shown = {
            (document.parent / target).resolve()
            for document in DOCUMENTS
            for target in relative_links(document)
        }
        for picture in (ROOT / "docs").glob("*.png"):
            assert picture.resolve() in shown, f"{picture.name} is not shown by any page"


class TestReadme:
    def test_is_a_front_page_that_starts_with_the_two_commands(self):
        text = README.read_text(encoding="utf-8")
        assert len(text.splitlines()) <= 250
        first_block = FENCE.search(text)
        assert first_block is not None and text.index(first_block.group()) < text.index("\n## ")
        commands = [line.split("#")[0].strip() for line in first_block.group().splitlines()[1:-1]]
        assert commands == ["make serve", "make test"]

    def test_links_every_page_of_docs(self):
        linked = {(README.parent / t.partition("#")[0]).resolve() for t in relative_links(README)}
        for page in (ROOT / "docs").glob("*.md"):
            assert page.resolve() in linked, f"the README does not link docs/{page.name}"


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
