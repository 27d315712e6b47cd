"""A product's NFTs reconciled with the chain: checks that find where they drifted, and the
repairs (``service``; the comparison itself in ``findings``, the jobs and chore in ``tasks``)."""
