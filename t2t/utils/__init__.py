"""Small helpers shared across t2t packages."""
