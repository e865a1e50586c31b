"""Algorithmic and synthetic tasks generated locally in seconds (no download)."""
