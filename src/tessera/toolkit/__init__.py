"""The shared toolkit."""
