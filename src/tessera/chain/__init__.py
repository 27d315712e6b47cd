"""Chain-facing code: custodial keys and SS58 addresses (the gateway comes with the chain work)."""
