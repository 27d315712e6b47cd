"""A ticket's PDF read back as a printer or a phone would: its pages drawn by poppler's
``pdftoppm`` (not by the library that made it) and their QR codes decoded by ZXing; its page
sizes and fonts as the file states them."""

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import NoReturn

import pytest
from PIL import Image

from tests.tickets.qr import decoded

PDFTOPPM = Path("/usr/bin/pdftoppm")
PDFFONTS = Path("/usr/bin/pdffonts")
PDFTOTEXT = Path("/usr/bin/pdftotext")


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("TESSERA_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TESSERA_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def poppler() -> None:
    if not all(tool.exists() for tool in (PDFTOPPM, PDFFONTS, PDFTOTEXT)):
        unavailable(f"{PDFTOPPM} is not installed: `apt-get install poppler-utils`")


def pages(pdf: bytes, dpi: int = 150) -> list[Image.Image]:
    """Each page drawn at ``dpi`` (``pdftoppm -r 150 -png``)."""
    poppler()
    with tempfile.TemporaryDirectory() as directory:
        source = Path(directory) / "ticket.pdf"
        source.write_bytes(pdf)
        subprocess.run(
            [str(PDFTOPPM), "-r", str(dpi), "-png", str(source), str(Path(directory) / "page")],
            check=True,
            capture_output=True,
            timeout=60,
        )
        drawn = sorted(Path(directory).glob("page*.png"))
        images = []
        for path in drawn:
            with Image.open(path) as image:
                images.append(image.convert("L"))
        return images


def codes(pdf: bytes) -> list[list[str]]:
    """The texts of the QR codes found on each page."""
    return [decoded(image) for image in pages(pdf)]


def media_boxes(pdf: bytes) -> list[tuple[int, int]]:
    """Each page's size in points, rounded (``/MediaBox [0 0 w h]``)."""
    found = re.findall(rb"/MediaBox\s*\[\s*0\s+0\s+([\d.]+)\s+([\d.]+)\s*\]", pdf)
    return [(round(float(w)), round(float(h))) for w, h in found]


def fonts(pdf: bytes) -> list[tuple[str, str, bool]]:
    """The fonts as ``pdffonts`` lists them: name, type, embedded."""
    poppler()
    with tempfile.NamedTemporaryFile(suffix=".pdf") as source:
        source.write(pdf)
        source.flush()
        listed = subprocess.run(
            [str(PDFFONTS), source.name], check=True, capture_output=True, text=True, timeout=60
        ).stdout.splitlines()[2:]  # under the heading and its rule
    found = []
    for line in listed:
        name, kind, *rest = line.split()
        # name, type (one or two words), encoding, emb, sub, uni, object, generation
        embedded = rest[-5] == "yes"
        found.append((name, kind, embedded))
    return found


def text(pdf: bytes) -> str:
    """The text of the pages as ``pdftotext`` reads it (in reading order)."""
    poppler()
    with tempfile.NamedTemporaryFile(suffix=".pdf") as source:
        source.write(pdf)
        source.flush()
        return subprocess.run(
            [str(PDFTOTEXT), source.name, "-"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
