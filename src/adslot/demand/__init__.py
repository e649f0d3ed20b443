"""Programmatic demand: OpenRTB 2.6 partners, bid requests and the auction."""
