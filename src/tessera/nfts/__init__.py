"""A product's work on chain, as the job worker does it (docs/chain.md): its NFT
collection (``collections``), its NFTs minted in batches (``mints``), their transfers mirrored
on chain (``transfers``), all through the ledger of signed extrinsics (``tessera.extrinsics``).
Use-cases ask for this work with ``tessera.products.nft_jobs.queue_nft``."""
