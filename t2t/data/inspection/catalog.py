"""The docs' table of registered problems, generated from the registry.

    python -m t2t.data.inspection.catalog            # print the markdown table
    python -m t2t.data.inspection.catalog --write docs/reference/problems.md   # the block
"""

from __future__ import annotations

import sys

from t2t import registry
from t2t.utils import readme_tables

BEGIN, END = readme_tables.markers("problems")


def _modalities(problem) -> str:
    try:
        hp = problem.hparams(None)
        inputs = hp.modality.get("inputs")
        targets = hp.modality.get("targets")
        return f"{inputs} -> {targets}" if inputs else f"{targets} (language model)"
    except Exception:  # text problems need their vocabulary to say their sizes
        names = [c.__name__ for c in type(problem).__mro__]
        if "Text2SelfProblem" in names:
            return "symbol (language model)"
        if "Text2ClassProblem" in names:
            return "symbol -> class_label"
        if "Image2TextProblem" in names:
            return "image -> symbol"
        if "SpeechRecognitionProblem" in names:
            return "audio -> symbol"
        if "TfdsProblem" in names or problem.name.startswith("tfds_"):
            return "from the TFDS features"
        return "symbol -> symbol"


def _vocab(problem) -> str:
    vocab_type = getattr(problem, "vocab_type", None)
    if vocab_type == "subword":
        return f"SentencePiece ~{problem.approx_vocab_size}"
    if vocab_type:
        return vocab_type
    if hasattr(problem, "num_symbols"):
        return f"{problem.num_symbols} symbols"
    return "-"


def _summary(problem) -> str:
    doc = (type(problem).__doc__ or "").strip().split("\n")[0]
    return doc.replace("|", "/")


def markdown_table() -> str:
    """One row per problem the library defines: modalities, vocabulary, splits, metrics."""
    rows = ["| problem | modalities | vocabulary | splits (shards) | metrics | data |",
            "|---|---|---|---|---|---|"]
    for name in registry.list_problems():
        problem = registry.problem(name)
        if not readme_tables.is_builtin(problem):
            continue
        splits = ", ".join(f"{s.name} ({s.shards})" for s in problem.splits)
        metrics = ", ".join(problem.eval_metrics())
        rows.append(f"| `{name}` | {_modalities(problem)} | {_vocab(problem)} | {splits} | "
                    f"{metrics} | {_summary(problem)} |")
    return "\n".join(rows)


def replace_block(text: str, block: str) -> str:
    """`text` with the lines between the problems markers replaced by `block`."""
    return readme_tables.replace_block(text, block, BEGIN, END)


def main(argv: list[str] | None = None) -> int:
    """The command line: print the problem table, or write it into a docs page."""
    return readme_tables.run_cli(argv, __doc__.split("\n")[0], markdown_table, BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
