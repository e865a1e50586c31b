"""`python -m regression`: see regression/runner.py."""

import sys

from regression.runner import main

if __name__ == "__main__":
    sys.exit(main())
