"""The console's forms as posted: text kept as typed (an empty field is ""), checked by the
use-cases' own schemas or rules where they exist. Every form also carries ``csrf``, which
``web.checked`` reads."""

from typing import Annotated, Literal

from pydantic import StringConstraints

from tessera.errors import InvalidInput
from tessera.schemas import Input

Field = Annotated[str, StringConstraints(max_length=1000)]


class LoginForm(Input):
    email: Field = ""
    password: Field = ""
    next: Field = "/console"


class KeyLoginForm(Input):
    api_key: Field = ""
    next: Field = "/console"


class ProjectForm(Input):
    name: Field = ""


class KeyForm(Input):
    permission: Literal["read", "write", "checkin"] = "read"
    name: Field = ""
    expires_in_days: Field = ""

    def expires_in(self) -> int | None:
        """Seconds, from the days typed (empty: never)."""
        days = self.expires_in_days.strip()
        if not days:
            return None
        if not days.isdigit() or not 1 <= int(days) <= 3650:
            raise InvalidInput("expires in days: a whole number from 1 to 3650")
        return int(days) * 86400


class ClientForm(Input):
    permission: Literal["read", "write"] = "read"


class TicketEmailsForm(Input):
    """The project's ``ticket_emails`` as the project page's button sets it."""

    ticket_emails: Literal["true", "false"]


class PrintingForm(Input):
    """The project's printable tickets as the project page's buttons set them: the paper, or
    whether ticket email carries the PDFs (the one posted; the other unchanged)."""

    paper: Literal["a4", "letter"] | None = None
    ticket_pdf_in_emails: Literal["true", "false"] | None = None


class RepairForm(Input):
    """A product's repair: "true" shows what it would do (the API's ``dry_run``), "false"
    queues it."""

    dry_run: Literal["true", "false"] = "true"
