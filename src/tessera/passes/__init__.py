"""Tickets in phone wallets: Apple Wallet passes and the PassKit web service that keeps them
current (``apple``, ``router``), Google Wallet links (``google``)."""
