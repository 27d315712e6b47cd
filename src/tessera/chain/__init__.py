"""Chain-facing code: the gateway protocol and its adapter, custodial keys, SS58 addresses."""
