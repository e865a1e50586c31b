"""Benchmarks. All of them in one run, with a summary of their key ratios appended to
benchmarks/history.jsonl: `python -m benchmarks [--quick] [--only A,B] [--skip A,B]`
(benchmarks/suite.py); two runs of the history compared, regressions beyond the noise of
repeated runs flagged: `python -m benchmarks compare [A] [B]` (benchmarks/compare.py). One
of them: `python -m benchmarks.<name> [--quick]`; each module has main(argv) -> dict
(distributed's returns an exit status; the suite collects its figures)."""
