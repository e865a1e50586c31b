"""A key figure of a benchmark run, as the suite's summary, the history file and
`python -m benchmarks compare` show it, and the change the suite marks WORSE."""

from __future__ import annotations

import dataclasses

FLAG_CHANGE = 0.10  # changes beyond this, in the worse direction, are marked WORSE


@dataclasses.dataclass
class Figure:
    """One key figure: `unit` is "x" (a ratio), "%" (a fraction shown as a percentage)
    or a throughput/size unit; `better` is "higher" or "lower"."""

    benchmark: str
    label: str
    value: float
    unit: str = "x"
    better: str = "higher"

    @property
    def key(self) -> str:
        return f"{self.benchmark}: {self.label}"

    def format(self, value: float | None = None) -> str:
        value = self.value if value is None else value
        if self.unit == "x":
            return f"{value:.3f}x"
        if self.unit == "%":
            return f"{100 * value:.1f}%"
        if self.unit == "MiB":
            return f"{value:,.1f} MiB"
        if 0 < abs(value) < 100 and value != int(value):
            # a slow throughput (image sampling's few images/s) keeps 3 significant digits
            return f"{value:.3g} {self.unit}"
        return f"{value:,.0f} {self.unit}"
