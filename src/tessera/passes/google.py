"""Google Wallet's "Add to Google Wallet" link: ``https://pay.google.com/gp/v/save/{jwt}``, the
JWT (``typ: savetowallet``, RS256, PyJWT) signed with the configured service account's key and
holding the ticket's event ticket class (one per product: ``{issuer id}.{product id}``) and its
object (``{issuer id}.{item id}-{ticket version}``) whose QR code is the ticket's secret.

Google keeps what a link saved: a saved object is not updated by a later link, and updating
or expiring one needs Google's REST API, which Tessera does not call. So the object's id names
the ticket's version: a reissued or transferred ticket is a new object, saved from its new
page, and the old one in a wallet shows a secret the door refuses (docs/wallets.md).
"""

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tessera.config import Settings
from tessera.passes.apple import WalletSettingsInvalid
from tessera.passes.facts import PassFacts, iso_date

SAVE_URL = "https://pay.google.com/gp/v/save/"


@dataclass(frozen=True, slots=True)
class GoogleWallet:
    """What signs the links: the issuer id and the service account's email, key and key id
    (``TESSERA_GOOGLE_WALLET_*``)."""

    issuer_id: str
    client_email: str
    key_id: str | None
    key: rsa.RSAPrivateKey

    @classmethod
    def load(cls, settings: Settings) -> "GoogleWallet | None":
        """The configured issuer, its key file read and checked; None when Google Wallet is
        not configured."""
        if not settings.google_wallet:
            return None
        assert settings.google_wallet_issuer_id is not None
        path = settings.google_wallet_key_file
        assert path is not None
        try:
            account = json.loads(path.read_bytes())
            key = serialization.load_pem_private_key(account["private_key"].encode(), None)
            email = str(account["client_email"])
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
            raise WalletSettingsInvalid(
                f"TESSERA_GOOGLE_WALLET_KEY_FILE: {path}: not a service account's JSON key "
                f"({type(error).__name__})"
            ) from None
        if not isinstance(key, rsa.RSAPrivateKey):
            raise WalletSettingsInvalid("TESSERA_GOOGLE_WALLET_KEY_FILE: an RSA key is needed")
        key_id = account.get("private_key_id")
        return cls(settings.google_wallet_issuer_id, email, key_id and str(key_id), key)

    def save_url(self, facts: PassFacts, *, product_id: uuid.UUID, version: int) -> str:
        """The link that saves the ticket to Google Wallet."""
        token = jwt.encode(
            self.claims(facts, product_id=product_id, version=version),
            self.key,
            algorithm="RS256",
            headers={"kid": self.key_id} if self.key_id else None,
        )
        return SAVE_URL + token

    def claims(self, facts: PassFacts, *, product_id: uuid.UUID, version: int) -> dict[str, Any]:
        """The JWT's claims: the product's class and the ticket's object (``facts.secret``
        as its QR code)."""
        assert facts.secret is not None  # a voided ticket has no link
        class_id = f"{self.issuer_id}.{product_id}"
        title = facts.event_name or facts.product
        ticket_class: dict[str, Any] = {
            "id": class_id,
            "issuerName": facts.organization,
            "reviewStatus": "UNDER_REVIEW",
            "eventName": _text(title),
        }
        if facts.event_location:
            venue: dict[str, Any] = {"name": _text(facts.event_location)}
            if facts.event_address:
                venue["address"] = _text(facts.event_address)
            ticket_class["venue"] = venue
        if facts.event_start is not None and facts.event_end is not None:
            ticket_class["dateTime"] = {
                "start": iso_date(facts.event_start),
                "end": iso_date(facts.event_end),
            }
        ticket_object: dict[str, Any] = {
            "id": f"{self.issuer_id}.{facts.serial}-{version}",
            "classId": class_id,
            "state": "ACTIVE",
            "ticketNumber": str(facts.item_number),
            "barcode": {
                "type": "QR_CODE",
                "value": facts.secret,
                "alternateText": f"#{facts.item_number}",
            },
        }
        if facts.holder:
            ticket_object["ticketHolderName"] = facts.holder
        if facts.seat is not None:
            ticket_object["seatInfo"] = {
                "section": _text(facts.seat.area),
                "row": _text(facts.seat.row),
                "seat": _text(facts.seat.number),
            }
        return {
            "iss": self.client_email,
            "aud": "google",
            "typ": "savetowallet",
            "iat": int(time.time()),
            "payload": {
                "eventTicketClasses": [ticket_class],
                "eventTicketObjects": [ticket_object],
            },
        }


def _text(value: str) -> dict[str, Any]:
    return {"defaultValue": {"language": "en-US", "value": value}}
