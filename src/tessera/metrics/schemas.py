"""What the workers count in the database (``metric_counts``): a count to add, and the bounds of
the histograms kept there (``tessera.metrics.counts`` writes and reads them)."""

from typing import Any

# NFTs (parts) per extrinsic, and seconds from an item's issue to its NFT in a final block.
PARTS = (1, 5, 10, 25, 50, 100, 200, 300, 400, 500, 1000)
MINT_SECONDS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 21600, 86400)

Count = dict[str, Any]  # a row of metric_counts to add
