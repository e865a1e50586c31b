"""`python -m benchmarks [--quick]`: every benchmark in one run (see benchmarks/suite.py);
`python -m benchmarks compare [A] [B]`: two history entries compared (benchmarks/compare.py);
`python -m benchmarks report [--write PAGE]`: the results page of the history (benchmarks/report.py)."""

import sys

from benchmarks.suite import main

if __name__ == "__main__":
    sys.exit(main())
