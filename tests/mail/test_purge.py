"""The worker's chore that forgets old mails: those sent or given up more than 30 days ago go,
the rest stay (its statement's literal list of statuses compiles like any list parameter)."""

import uuid
from datetime import timedelta

from sqlalchemy import select

from tessera.mail.sender import KEPT_FOR, purge_chore
from tessera.models import Mail, MailStatus
from tessera.models.base import utcnow
from tests import orm


async def add_mail(database, project_id: uuid.UUID, status: MailStatus, age: timedelta) -> str:
    subject = f"{status} {age.days} days ago"
    row = {
        "project_id": project_id,
        "recipient": "ada@example.com",
        "subject": subject,
        "text_body": "hello",
        "html_body": "<p>hello</p>",
        "cause": f"test:{uuid.uuid4()}",
        "status": status,
        "created_at": utcnow() - age,
    }
    async with database.transaction() as tx:
        await tx.insert(Mail, [row])
        await tx.commit()
    return subject


async def test_the_chore_forgets_the_mails_sent_or_failed_past_the_kept_time(database, tenant):
    old, recent = KEPT_FOR + timedelta(days=1), KEPT_FOR - timedelta(days=1)
    kept = [
        await add_mail(database, tenant.project_id, MailStatus.SENT, recent),
        await add_mail(database, tenant.project_id, MailStatus.FAILED, recent),
        await add_mail(database, tenant.project_id, MailStatus.QUEUED, old),
    ]
    for status in (MailStatus.SENT, MailStatus.FAILED):
        await add_mail(database, tenant.project_id, status, old)
    interval, purge = purge_chore()
    assert interval == 3600.0
    assert await purge(database) == 2
    async with orm.session(database, write=False) as session:
        left = sorted(await session.scalars(select(Mail.subject)))
    assert left == sorted(kept)
    assert await purge(database) == 0
