"""t2t's regression suite: `python -m regression {list,run,readme}` (see README.md)."""
