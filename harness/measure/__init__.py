"""Measuring one run: the protocol, the isolated child, profiles and traces."""
