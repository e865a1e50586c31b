"""Benchmarks: `python -m benchmarks.<name> [--quick]`; each module has main(argv) -> dict."""
