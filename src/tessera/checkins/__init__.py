"""Check-in at the door by a ticket's secret, modelled on pretix's check-in RPC, with an undo
window (docs/tickets.md)."""
