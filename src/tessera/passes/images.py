"""A pass's images: its icon (29 points square) and its logo (at most 160 by 50 points), each at
1x, 2x and 3x, drawn from the project's logo (``tessera project set-logo``) or, without one,
Tessera's mark. Pillow scales them; the same logo gives the same files, kept in a small cache."""

import io
from functools import lru_cache

from PIL import Image, ImageDraw, ImageOps

from tessera.errors import InvalidInput

ICON = (29, 29)
LOGO = (160, 50)
SCALES = (1, 2, 3)
MAX_LOGO_BYTES = 512 * 1024
MAX_LOGO_SIDE = 4096


def checked_logo(data: bytes) -> bytes:
    """``data`` when it is a PNG of at most 512 KiB and 4096 pixels a side (read from its
    header: a huge image is refused before it is decoded)."""
    if len(data) > MAX_LOGO_BYTES:
        raise InvalidInput(f"logo: at most {MAX_LOGO_BYTES // 1024} KiB")
    try:
        with Image.open(io.BytesIO(data), formats=["PNG"]) as image:
            if max(image.size) > MAX_LOGO_SIDE:
                raise InvalidInput(f"logo: at most {MAX_LOGO_SIDE} pixels a side")
            image.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise InvalidInput(f"logo: not a PNG image ({error})") from None
    return data


def pass_images(logo: bytes | None) -> dict[str, bytes]:
    """``icon.png``, ``icon@2x.png``, ``icon@3x.png``, ``logo.png``, ... of ``logo`` (PNG), or
    of Tessera's mark without one."""
    return _images(logo)


@lru_cache(maxsize=32)
def _images(logo: bytes | None) -> dict[str, bytes]:
    source = _mark() if logo is None else Image.open(io.BytesIO(logo), formats=["PNG"])
    source = source.convert("RGBA")
    images = {}
    for scale in SCALES:
        suffix = "" if scale == 1 else f"@{scale}x"
        for name, (width, height), square in (("icon", ICON, True), ("logo", LOGO, False)):
            images[f"{name}{suffix}.png"] = _fitted(source, width * scale, height * scale, square)
    return images


def _fitted(source: Image.Image, width: int, height: int, square: bool) -> bytes:
    """``source`` scaled (up or down) to fit ``width`` by ``height``: an icon centred on a
    square of that size (transparent around it), a logo as wide as it comes out."""
    image = ImageOps.contain(source, (width, height), Image.Resampling.LANCZOS)
    if square:
        canvas = Image.new("RGBA", (width, height), (0, 0, 0, 0))
        canvas.paste(image, ((width - image.width) // 2, (height - image.height) // 2))
        image = canvas
    out = io.BytesIO()
    image.save(out, "PNG", optimize=True)
    return out.getvalue()


def _mark() -> Image.Image:
    """Tessera's mark: a white T on a dark rounded square, 300 pixels a side."""
    side = 300
    image = Image.new("RGBA", (side, side), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((0, 0, side - 1, side - 1), radius=60, fill=(27, 31, 36, 255))
    draw.rectangle((70, 70, 230, 110), fill=(255, 255, 255, 255))
    draw.rectangle((130, 70, 170, 235), fill=(255, 255, 255, 255))
    return image
