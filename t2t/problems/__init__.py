"""Problems: data sets with their download, preprocessing, vocabulary and pipeline.

Every module in this package is imported when the registry first lists or looks up a
problem, so a new problem is one new file with one decorated class.
"""


def available() -> list[str]:
    """Every registered problem's name, sorted (Tensor2Tensor's `problems.available()`;
    importing the problem modules on the first call, as the registry does)."""
    from t2t import registry

    return sorted(registry.list_problems())
