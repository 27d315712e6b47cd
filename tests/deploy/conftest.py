"""Tessera as deployed (deploy/, docs/deploy.md): Debian's nginx with ``deploy/nginx.conf`` and a
throwaway certificate in front of ``tessera serve``; Debian's PgBouncer in front of PostgreSQL.

Without nginx or PgBouncer these tests skip with the reason; with TESSERA_REQUIRE_DEPLOY=1 (CI)
they fail instead.
"""

import base64
import hashlib
import ipaddress
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NoReturn

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HOST = "tickets.test"


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("TESSERA_REQUIRE_DEPLOY") == "1":
        pytest.fail(f"TESSERA_REQUIRE_DEPLOY=1 but {reason}")
    pytest.skip(reason)


def program(path: str, package: str) -> Path:
    found = Path(path)
    if not found.exists() and (on_path := shutil.which(found.name)) is not None:
        found = Path(on_path)
    if not found.exists():
        unavailable(f"{path} is not installed: `apt-get install {package}`")
    return found


@dataclass(frozen=True)
class Certificate:
    """A throwaway CA and the server certificate it issued for ``HOST`` and 127.0.0.1."""

    ca: Path
    chain: Path
    key: Path
    spki_sha256: str  # base64: what Chromium's --ignore-certificate-errors-spki-list takes

    @classmethod
    def make(cls, directory: Path) -> "Certificate":
        now = datetime.now(UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Tessera test CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=7))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName(HOST), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        pem = serialization.Encoding.PEM
        made = cls(directory / "ca.pem", directory / "fullchain.pem", directory / "privkey.pem", "")
        made.ca.write_bytes(ca.public_bytes(pem))
        made.chain.write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
        made.key.write_bytes(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        made.key.chmod(0o600)
        spki = leaf.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return cls(
            made.ca, made.chain, made.key, base64.b64encode(hashlib.sha256(spki).digest()).decode()
        )


NGINX_SITE = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf"


def nginx_site(
    *, http_port: int, https_port: int, upstream: int, certificate: Certificate, webroot: Path
) -> str:
    """deploy/nginx.conf with what docs/deploy.md says to change (the host name, the
    certificate, the key), and the ports and addresses of a test: loopback, unprivileged."""
    site = NGINX_SITE.read_text(encoding="utf-8")
    changes = {
        "listen 80;": f"listen 127.0.0.1:{http_port};",
        "listen [::]:80;\n": "",
        "listen 443 ssl http2;": f"listen 127.0.0.1:{https_port} ssl http2;",
        "listen [::]:443 ssl http2;\n": "",
        "server 127.0.0.1:8000;": f"server 127.0.0.1:{upstream};",
        "server_name tickets.example.com;": f"server_name {HOST};",
        "/etc/letsencrypt/live/tickets.example.com/fullchain.pem": str(certificate.chain),
        "/etc/letsencrypt/live/tickets.example.com/privkey.pem": str(certificate.key),
        "root /var/www/html;": f"root {webroot};",
    }
    for old, new in changes.items():
        assert old in site, f"deploy/nginx.conf no longer has {old!r}: update docs/deploy.md too"
        site = site.replace(old, new)
    return site


def nginx_main(directory: Path, site: Path) -> str:
    """The main configuration Debian's /etc/nginx/nginx.conf would be, in ``directory``."""
    temp = "\n".join(
        f"    {name}_temp_path {directory / name};"
        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root;\n" if os.geteuid() == 0 else ""
    return (
        f"{user}daemon off;\nworker_processes 1;\npid {directory / 'nginx.pid'};\n"
        f"error_log {directory / 'error.log'} info;\n"
        "events { worker_connections 512; }\n"
        "http {\n"
        f"    access_log {directory / 'access.log'};\n{temp}\n"
        f"    include {site};\n"
        "}\n"
    )
