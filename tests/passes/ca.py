"""A test CA standing in for Apple: a root, a WWDR-like intermediate it issued, and a pass type
id's certificate the intermediate issued, each with a key of its own (made in the test run,
written as PEM files the settings name). ``verified`` asks OpenSSL whether a ``.pkpass``'s
signature holds against the root; a service account's key stands in for Google's."""

import json
import subprocess
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASS_TYPE_ID = "pass.test.tessera.tickets"
TEAM_ID = "TESTTEAM42"
ISSUER_ID = "3388000000022222222"
SERVICE_ACCOUNT = "wallet@tessera-test.iam.gserviceaccount.com"
KEY_PASSWORD = "pass-key-password"
OPENSSL = "/usr/bin/openssl"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _name(common_name: str, **more: str) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if "uid" in more:
        attributes.append(x509.NameAttribute(NameOID.USER_ID, more["uid"]))
    if "team" in more:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, more["team"]))
    return x509.Name(attributes)


def _issued(
    subject: x509.Name,
    key: rsa.RSAPrivateKey,
    issuer: x509.Name,
    issuer_key: rsa.RSAPrivateKey,
    *,
    ca: bool,
) -> x509.Certificate:
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class StandInCa:
    """The files of the stand-in CA, under ``directory``."""

    directory: Path

    @property
    def root(self) -> Path:
        return self.directory / "root.pem"

    @property
    def wwdr(self) -> Path:
        return self.directory / "wwdr.pem"

    @property
    def certificate(self) -> Path:
        return self.directory / "pass.pem"

    @property
    def key(self) -> Path:
        return self.directory / "pass-key.pem"

    @property
    def other_key(self) -> Path:
        """A key that is not the pass certificate's."""
        return self.directory / "other-key.pem"

    @property
    def google_key_file(self) -> Path:
        return self.directory / "service-account.json"

    @property
    def google_public_key(self) -> Path:
        return self.directory / "service-account-public.pem"

    @classmethod
    def make(cls, directory: Path) -> "StandInCa":
        ca = cls(directory)
        root_key, wwdr_key, pass_key = _key(), _key(), _key()
        root_name = _name("Tessera Test Root CA")
        wwdr_name = _name("Tessera Test WWDR Intermediate")
        root = _issued(root_name, root_key, root_name, root_key, ca=True)
        wwdr = _issued(wwdr_name, wwdr_key, root_name, root_key, ca=True)
        pass_name = _name(f"Pass Type ID: {PASS_TYPE_ID}", uid=PASS_TYPE_ID, team=TEAM_ID)
        certificate = _issued(pass_name, pass_key, wwdr_name, wwdr_key, ca=False)
        ca.root.write_bytes(_pem(root))
        ca.wwdr.write_bytes(_pem(wwdr))
        ca.certificate.write_bytes(_pem(certificate))
        encryption = serialization.BestAvailableEncryption(KEY_PASSWORD.encode())
        ca.key.write_bytes(
            pass_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
            )
        )
        ca.other_key.write_bytes(
            _key().private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        google_key = _key()
        account = {
            "type": "service_account",
            "project_id": "tessera-test",
            "private_key_id": uuid.uuid4().hex,
            "private_key": google_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ).decode(),
            "client_email": SERVICE_ACCOUNT,
            "client_id": "100000000000000000001",
            "token_uri": "https://oauth2.googleapis.com/token",
        }
        ca.google_key_file.write_text(json.dumps(account))
        ca.google_public_key.write_bytes(
            google_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return ca

    def settings(self) -> dict[str, object]:
        """The wallet settings that name these files."""
        return {
            "apple_pass_type_id": PASS_TYPE_ID,
            "apple_team_id": TEAM_ID,
            "apple_pass_certificate": self.certificate,
            "apple_pass_key": self.key,
            "apple_pass_key_password": KEY_PASSWORD,
            "apple_wwdr_certificate": self.wwdr,
            "google_wallet_issuer_id": ISSUER_ID,
            "google_wallet_key_file": self.google_key_file,
        }

    def verified(
        self, signature: bytes, manifest: bytes, scratch: Path
    ) -> subprocess.CompletedProcess[str]:
        """OpenSSL's verdict on ``signature`` (DER, detached) of ``manifest`` against the test
        root: the chain through the intermediate the signature carries."""
        signature_file, manifest_file = scratch / "signature", scratch / "manifest.json"
        signature_file.write_bytes(signature)
        manifest_file.write_bytes(manifest)
        return subprocess.run(
            [
                OPENSSL,
                "cms",
                "-verify",
                "-binary",
                "-inform",
                "DER",
                "-in",
                str(signature_file),
                "-content",
                str(manifest_file),
                "-CAfile",
                str(self.root),
                "-purpose",
                "any",
                "-out",
                "/dev/null",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
