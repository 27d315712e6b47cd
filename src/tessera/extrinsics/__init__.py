"""The ledger of the extrinsics Tessera's custodial keys sign: each signer's nonces, shared by
every worker, and each extrinsic followed from its signing to its final block (``service``)."""
