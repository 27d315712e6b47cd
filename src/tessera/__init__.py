"""Tessera: event tickets, perks and user wallets behind the Mufi Wallet API 2.72.0 contract."""

API_VERSION = "2.72.0"

try:
    from importlib.metadata import version as _version

    __build__ = _version("tessera")
except Exception:  # pragma: no cover - running from a source tree without an install
    __build__ = "unknown"
