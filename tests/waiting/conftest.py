"""The waiting list's offers are emailed: its tests run on the app that sends email to a real
SMTP server on 127.0.0.1 (tests/mail/conftest.py), with the same fixtures."""

from tests.mail.conftest import (  # noqa: F401 - fixtures
    client,
    mail_app,
    mail_settings,
    plain,
    postman,
    smtp,
    smtp_server,
    tenant,
)
