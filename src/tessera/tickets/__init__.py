"""Tickets: every item is one, with a secret to print as a QR code and a page its holder shows
at the door (docs/tickets.md)."""
