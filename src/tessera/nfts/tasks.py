"""The NFT jobs' handlers, by kind (``tessera.main.job_handlers`` registers them)."""

from tessera.jobs.queue import JobKind
from tessera.jobs.worker import BatchHandler, JobHandler
from tessera.nfts import collections, mints, transfers
from tessera.nfts.service import show_items, show_products

HANDLERS: dict[str, JobHandler | BatchHandler] = {
    JobKind.CREATE_COLLECTION: JobHandler(collections.create_collection, show_products),
    JobKind.MINT: BatchHandler(mints.mint, show_items(JobKind.MINT), mints.capacity),
    JobKind.TRANSFER: BatchHandler(
        transfers.transfer, show_items(JobKind.TRANSFER), transfers.capacity
    ),
}
