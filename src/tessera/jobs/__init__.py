"""Durable jobs: rows written in the same transaction as the change that needs them."""
