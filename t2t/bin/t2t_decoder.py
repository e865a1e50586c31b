"""t2t-decoder: not implemented yet (arrives with the "inference and serving" issue)."""

from __future__ import annotations

import sys


def run() -> None:
    """Console-script entry point."""
    sys.stderr.write("t2t-decoder: not implemented yet; it arrives with the inference and serving work. "
                     "See README.md.\n")
    sys.exit(2)


if __name__ == "__main__":
    run()
