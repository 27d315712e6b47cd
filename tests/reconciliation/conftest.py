"""The job worker's app on the in-memory chain, as the jobs' tests have it (tests/jobs)."""

from tests.jobs.conftest import chain, client, impatient, jobs_app, worker

__all__ = ["chain", "client", "impatient", "jobs_app", "worker"]
