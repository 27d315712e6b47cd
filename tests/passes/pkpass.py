"""Reading a ``.pkpass`` as a device would: the zip's files, each one's SHA-1 checked against the
manifest (which names them all and nothing else), the signature checked by OpenSSL against
the stand-in CA."""

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

from tests.passes.ca import StandInCa

IMAGES = {
    "icon.png": (29, 29),
    "icon@2x.png": (58, 58),
    "icon@3x.png": (87, 87),
    "logo.png": (160, 50),
    "logo@2x.png": (320, 100),
    "logo@3x.png": (480, 150),
}


def files_of(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        return {name: archive.read(name) for name in archive.namelist()}


def opened(data: bytes, ca: StandInCa, scratch: Path) -> dict[str, Any]:
    """``pass.json`` of a pass whose manifest and signature hold."""
    files = files_of(data)
    assert set(files) == {"pass.json", "manifest.json", "signature", *IMAGES}
    manifest = json.loads(files["manifest.json"])
    assert set(manifest) == set(files) - {"manifest.json", "signature"}
    for name, digest in manifest.items():
        assert hashlib.sha1(files[name]).hexdigest() == digest, name  # noqa: S324
    verdict = ca.verified(files["signature"], files["manifest.json"], scratch)
    assert verdict.returncode == 0, verdict.stderr
    assert "Verification successful" in verdict.stderr
    content: dict[str, Any] = json.loads(files["pass.json"])
    return content
