"""Email: the outbox that the use-cases write in their transactions, and the job worker's
sender (README, "Email")."""
