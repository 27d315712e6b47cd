"""Apple Wallet passes, as Apple specifies them: a zip of ``pass.json``, its images, a
``manifest.json`` naming each file's SHA-1, and ``signature``, a detached PKCS #7 (CMS)
signature of the manifest by the pass type id's certificate, carrying Apple's WWDR intermediate
that issued it (``cryptography``'s PKCS #7 builder: DER, binary content, the signing time among
the signed attributes).

A pass is an ``eventTicket`` whose QR code is the ticket's current secret. It names the web
service that keeps it current (``webServiceURL``: ``{TESSERA_PUBLIC_URL}/passkit``) and the
token a device shows it (``authenticationToken``): an HMAC of the item and its holder, so that
a reissue keeps it (the holder's devices fetch the new secret) and a transfer does not (the
old holder's devices get the pass voided, the new holder's pass has a token of its own).
"""

import hashlib
import hmac
import io
import json
import uuid
import zipfile
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import NameOID

from tessera.config import Settings
from tessera.passes.facts import PassFacts, iso_date

_TOKEN_USE = b"tessera wallet pass token\0"


class WalletSettingsInvalid(ValueError):
    """A wallet's setting names a file that cannot be read or does not hold what it should
    (raised at start-up; never shows a key's content)."""


@dataclass(frozen=True, slots=True)
class AppleWallet:
    """What signs the server's passes: the pass type id, its team, certificate and key, and
    the WWDR certificate that issued it (``TESSERA_APPLE_*``)."""

    pass_type_id: str
    team_id: str
    certificate: x509.Certificate
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    wwdr: x509.Certificate

    @classmethod
    def load(cls, settings: Settings) -> "AppleWallet | None":
        """The configured wallet, its files read and checked (the key must be the
        certificate's, the WWDR certificate its issuer, the pass type id and team its own);
        None when Apple Wallet is not configured."""
        if not settings.apple_wallet:
            return None
        assert settings.apple_pass_type_id is not None and settings.apple_team_id is not None
        assert settings.apple_pass_certificate is not None
        assert settings.apple_pass_key is not None and settings.apple_wwdr_certificate is not None
        certificate = _certificate("apple_pass_certificate", settings.apple_pass_certificate)
        wwdr = _certificate("apple_wwdr_certificate", settings.apple_wwdr_certificate)
        password = settings.apple_pass_key_password
        try:
            key = serialization.load_pem_private_key(
                settings.apple_pass_key.read_bytes(),
                password.get_secret_value().encode() if password is not None else None,
            )
        except (OSError, ValueError, TypeError) as error:
            # The message of a failed load names the file and why, never its bytes.
            raise WalletSettingsInvalid(
                f"TESSERA_APPLE_PASS_KEY: {settings.apple_pass_key}: not a PEM private key "
                f"this password opens ({type(error).__name__})"
            ) from None
        if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            raise WalletSettingsInvalid("TESSERA_APPLE_PASS_KEY: an RSA or EC key is needed")
        if _public(key.public_key()) != _public(certificate.public_key()):
            raise WalletSettingsInvalid(
                "TESSERA_APPLE_PASS_KEY is not the key of TESSERA_APPLE_PASS_CERTIFICATE"
            )
        _check_issued(certificate, wwdr, settings.apple_wwdr_certificate)
        # A pass names its pass type id and team, which must be the certificate's: otherwise
        # it is signed, served and then refused by every iPhone, with no word to the server.
        _check_subject(certificate, "apple_pass_type_id", settings.apple_pass_type_id)
        _check_subject(certificate, "apple_team_id", settings.apple_team_id)
        return cls(settings.apple_pass_type_id, settings.apple_team_id, certificate, key, wwdr)

    def package(self, content: dict[str, Any], images: dict[str, bytes]) -> bytes:
        """The signed ``.pkpass`` of ``content`` (pass.json) with ``images`` (file name to
        PNG)."""
        files = {"pass.json": json.dumps(content, ensure_ascii=False).encode(), **images}
        manifest = json.dumps(
            {name: hashlib.sha1(data).hexdigest() for name, data in files.items()},  # noqa: S324 - Apple's manifest is SHA-1
            sort_keys=True,
        ).encode()
        signature = (
            pkcs7.PKCS7SignatureBuilder()
            .set_data(manifest)
            .add_signer(self.certificate, self.key, hashes.SHA256())
            .add_certificate(self.wwdr)
            .sign(
                serialization.Encoding.DER,
                [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Binary],
            )
        )
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in {**files, "manifest.json": manifest, "signature": signature}.items():
                archive.writestr(name, data)
        return out.getvalue()


def _certificate(setting: str, path: Any) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as error:
        raise WalletSettingsInvalid(
            f"TESSERA_{setting.upper()}: {path}: not a PEM certificate ({type(error).__name__})"
        ) from None


# Apple's pass certificates name the pass type id as the subject's UID, the team as its OU.
_SUBJECT_OIDS = {
    "apple_pass_type_id": NameOID.USER_ID,
    "apple_team_id": NameOID.ORGANIZATIONAL_UNIT_NAME,
}


def _check_issued(certificate: x509.Certificate, wwdr: x509.Certificate, path: Any) -> None:
    try:
        certificate.verify_directly_issued_by(wwdr)
    except (ValueError, TypeError, InvalidSignature):
        raise WalletSettingsInvalid(
            f"TESSERA_APPLE_WWDR_CERTIFICATE: {path}: did not issue TESSERA_APPLE_PASS_CERTIFICATE"
        ) from None


def _check_subject(certificate: x509.Certificate, setting: str, value: str) -> None:
    found = [
        str(attribute.value)
        for attribute in certificate.subject.get_attributes_for_oid(_SUBJECT_OIDS[setting])
    ]
    if value not in found:
        raise WalletSettingsInvalid(
            f"TESSERA_{setting.upper()}: {value} is not the one of "
            f"TESSERA_APPLE_PASS_CERTIFICATE ({', '.join(found) or 'none named'})"
        )


def _public(key: Any) -> bytes:
    return bytes(
        key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def authentication_token(hash_key: bytes, item_id: uuid.UUID, owner_id: uuid.UUID) -> str:
    """The token the devices of the item's holder ``owner_id`` show the web service: 32 hex
    characters (Apple wants at least 16)."""
    message = _TOKEN_USE + item_id.bytes + owner_id.bytes
    return hmac.digest(hash_key, message, "sha256")[:16].hex()


def token_holds(hash_key: bytes, item_id: uuid.UUID, owner_id: uuid.UUID, token: str) -> bool:
    return hmac.compare_digest(authentication_token(hash_key, item_id, owner_id), token)


def pass_content(
    wallet: AppleWallet, facts: PassFacts, *, web_service_url: str, token: str
) -> dict[str, Any]:
    """``pass.json`` of an ``eventTicket``: the event (else the product) in front with the
    holder, the item's number and when and where; the QR code of the secret, the secret
    written out on the back. Relevant at the event's start, expired at its end."""
    title = facts.event_name or facts.product
    fields: dict[str, list[dict[str, Any]]] = {
        "primaryFields": [{"key": "event", "label": "EVENT", "value": title}],
        "secondaryFields": [
            {"key": "holder", "label": "HOLDER", "value": facts.holder or "No name given"},
            {"key": "item", "label": "ITEM", "value": f"#{facts.item_number}"},
        ],
        "auxiliaryFields": [],
        "backFields": [
            {"key": "product", "label": "Ticket", "value": facts.product},
        ],
    }
    content: dict[str, Any] = {
        "formatVersion": 1,
        "passTypeIdentifier": wallet.pass_type_id,
        "teamIdentifier": wallet.team_id,
        "serialNumber": str(facts.serial),
        "organizationName": facts.organization,
        "description": f"Ticket: {title}",
        "webServiceURL": web_service_url,
        "authenticationToken": token,
        # Whoever holds the code can show the ticket: Wallet offers no Share button for it.
        "sharingProhibited": True,
        "eventTicket": fields,
    }
    if facts.event_start is not None and facts.event_end is not None:
        content["relevantDate"] = iso_date(facts.event_start)
        content["expirationDate"] = iso_date(facts.event_end)
        fields["auxiliaryFields"].append(
            {
                "key": "starts",
                "label": "STARTS",
                "value": iso_date(facts.event_start),
                "dateStyle": "PKDateStyleMedium",
                "timeStyle": "PKDateStyleShort",
            }
        )
    place = ", ".join(p for p in (facts.event_location, facts.event_address) if p)
    if place:
        fields["auxiliaryFields"].append({"key": "place", "label": "PLACE", "value": place})
    if facts.seat is not None:
        # The seat in front, and as the semantic tags a Wallet reads out (iOS 15 and later).
        fields["secondaryFields"] += [
            {"key": "section", "label": "SECTION", "value": facts.seat.area},
            {"key": "row", "label": "ROW", "value": facts.seat.row},
            {"key": "seat", "label": "SEAT", "value": facts.seat.number},
        ]
        content["semantics"] = {
            "seats": [
                {
                    "seatSection": facts.seat.area,
                    "seatRow": facts.seat.row,
                    "seatNumber": facts.seat.number,
                }
            ]
        }
    if facts.secret is None:
        content["voided"] = True
        fields["backFields"].append(
            {
                "key": "voided",
                "label": "Not valid",
                "value": "This ticket was passed on to someone else.",
            }
        )
    else:
        content["barcodes"] = [
            {
                "format": "PKBarcodeFormatQR",
                "message": facts.secret,
                "messageEncoding": "iso-8859-1",
                "altText": f"#{facts.item_number}",
            }
        ]
        fields["backFields"].append(
            {
                "key": "secret",
                "label": "Ticket secret, if the code cannot be scanned",
                "value": facts.secret,
            }
        )
    return content
