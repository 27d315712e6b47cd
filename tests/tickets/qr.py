"""A ticket page's QR code read back: its SVG's modules drawn as pixels and decoded by ZXing,
so that what a test checks is what a scanner reads, not how the page drew it."""

import re

import zxingcpp
from PIL import Image

PIXELS = 8  # per module


def modules(svg: str) -> list[list[bool]]:
    """The dark modules of an SVG of horizontal strokes one module high (``M``/``m`` moves,
    ``h`` runs), quiet zone included, as the ``viewBox`` sizes it."""
    found = re.search(r'viewBox="0 0 (\d+) (\d+)"', svg)
    assert found, "no viewBox"
    size = int(found[1])
    [path] = re.findall(r'<path [^>]*stroke="#000"[^>]*d="([^"]+)"', svg)
    grid = [[False] * size for _ in range(size)]
    x = y = 0.0
    command = ""
    tokens = re.findall(r"[A-Za-z]|-?\d+(?:\.\d+)?", path)
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if token.isalpha():
            assert token in "Mmh", f"unexpected path command {token}"
            command, at = token, at + 1
        elif command in "Mm":
            dx, dy = float(token), float(tokens[at + 1])
            x, y = (dx, dy) if command == "M" else (x + dx, y + dy)
            at += 2
        else:
            run = float(token)
            for column in range(int(x), int(x + run)):
                grid[int(y)][column] = True
            x, at = x + run, at + 1
    return grid


def image(grid: list[list[bool]]) -> Image.Image:
    picture = Image.new("L", (len(grid) * PIXELS,) * 2, 255)
    for row, cells in enumerate(grid):
        for column, dark in enumerate(cells):
            if dark:
                box = (column * PIXELS, row * PIXELS, (column + 1) * PIXELS, (row + 1) * PIXELS)
                picture.paste(0, box)
    return picture


def decoded(picture: Image.Image) -> list[str]:
    """The texts of the QR codes ZXing finds in the picture."""
    return [code.text for code in zxingcpp.read_barcodes(picture, formats=zxingcpp.QRCode)]
