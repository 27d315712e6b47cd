"""Email: the outbox that the use-cases write in their transactions, and the job worker's
sender (docs/email.md)."""
