"""The HTTP machinery."""
