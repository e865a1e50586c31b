"""t2t-trainer: not implemented yet (arrives with the "models and the trainer" issue)."""

from __future__ import annotations

import sys


def run() -> None:
    """Console-script entry point."""
    sys.stderr.write("t2t-trainer: not implemented yet; it arrives with the models and the trainer work. "
                     "See README.md.\n")
    sys.exit(2)


if __name__ == "__main__":
    run()
