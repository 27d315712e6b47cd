"""The HTTP side of ticket email: a project route's change gets its ``TicketMail`` from the
request (the links lead to ``TESSERA_PUBLIC_URL``, else to the request's base URL)."""

from starlette.requests import Request

from tessera.auth.principal import Principal
from tessera.config import Settings
from tessera.mail.service import TicketMail, ticket_mail
from tessera.ticket_keys.service import Signers
from tessera.web.urls import public_base


def for_request(
    request: Request, principal: Principal, settings: Settings, signers: Signers
) -> TicketMail | None:
    """The ticket mail of a project route's change: None unless the caller's project asks for
    ticket email and the server sends email."""
    if not principal.ticket_emails:
        return None
    return ticket_mail(settings, signers, public_base(settings, request))
