"""Credentials: API keys, Tessera's own JWT issuer and external OIDC issuers."""
