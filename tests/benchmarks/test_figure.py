"""benchmarks/figure.py: how a key figure is printed."""

from benchmarks.figure import Figure


def test_each_unit_prints_its_own_way():
    assert Figure("b", "ratio", 1.23456).format() == "1.235x"
    assert Figure("b", "mfu", 0.4921, unit="%").format() == "49.2%"
    assert Figure("b", "peak", 1237.84, unit="MiB").format() == "1,237.8 MiB"
    assert Figure("b", "tokens/s", 17305.4, unit="tokens/s").format() == "17,305 tokens/s"
    assert Figure("b", "soak", 3, unit="errors", better="lower").format() == "3 errors"


def test_a_slow_throughput_keeps_its_significant_digits():
    # image sampling draws a cifar10 image in about a minute: 0.0149 images/s, not "0"
    assert Figure("b", "cifar10", 0.014934, unit="images/s").format() == "0.0149 images/s"
    assert Figure("b", "mnist", 4.1028, unit="images/s").format() == "4.1 images/s"
    assert Figure("b", "given", 99.97, unit="req/s", better="higher").format(250.4) == "250 req/s"
