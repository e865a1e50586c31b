"""Training pairs made by a model, over a registered text-to-text problem P:

  distilled:P        sequence-level distillation (Kim & Rush, 2016): the train split is
                     P's train inputs paired with a teacher's outputs for them.
  backtranslated:P   (tagged) back-translation (Sennrich et al., 2016; Caswell et al.,
                     2019): P's own train pairs plus synthetic ones, whose sources a
                     target->source model wrote from monolingual target text; each
                     synthetic source starts with a tag token.

Both read their pairs from two line-aligned text files in t2t-datagen's --tmp_dir,
KIND.inputs and KIND.targets (KIND: distilled or backtranslated), encode them with P's
vocabulary and write their own train shards (`P_KIND-train-*`); dev and test are P's
own, so the numbers compare with a run on P. A subclass changes the choices:

    @registry.register_problem
    class BacktranslatedEnde(SyntheticPairsProblem):
        kind, keep_real, tag_synthetic, synthetic_ratio = "backtranslated", True, True, 0.5
        def __init__(self, was_reversed=False):
            super().__init__("translate_ende_wmt32k")
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from typing import Any

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.data.generation import generator_utils
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")  # registering the names needs no TensorFlow

KINDS = ("distilled", "backtranslated")
TAG_TOKEN = "<synthetic>"


class SyntheticPairsError(ValueError):
    """Synthetic pairs that cannot be built (the message names the file and the fix)."""


def pair_files(tmp_dir: str, kind: str) -> tuple[str, str]:
    """(inputs file, targets file) that `kind:P` reads from t2t-datagen's --tmp_dir."""
    return os.path.join(tmp_dir, f"{kind}.inputs"), os.path.join(tmp_dir, f"{kind}.targets")


def _lines(path: str) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            yield line.rstrip("\n").rstrip("\r")


def read_pairs(inputs_path: str, targets_path: str) -> Iterator[tuple[str, str]]:
    """(input, target) lines of two line-aligned files; SyntheticPairsError naming both
    files when one is missing or they differ in length (a decode not yet finished)."""
    for path in (inputs_path, targets_path):
        if not os.path.isfile(path):
            raise SyntheticPairsError(f"{path} does not exist: write it first (see "
                                      f"t2t.data.synthetic_pairs or docs/how-to/distillation.md).")
    counts = [sum(1 for _ in _lines(p)) for p in (inputs_path, targets_path)]
    if counts[0] != counts[1]:
        raise SyntheticPairsError(
            f"{inputs_path} has {counts[0]} lines and {targets_path} {counts[1]}: the pairs "
            f"are line by line (is a t2t-decoder run into one of them unfinished? Run it "
            f"again with the same flags: it continues).")
    if counts[0] == 0:
        raise SyntheticPairsError(f"{inputs_path} and {targets_path} are empty.")
    yield from zip(_lines(inputs_path), _lines(targets_path), strict=True)


def interleave(real: Iterator[Any], synthetic: Iterator[Any], ratio: float | None
               ) -> Iterator[Any]:
    """Real items with `ratio` synthetic ones per real one, spread evenly (ratio None: all
    synthetic items, spread over the real ones; without real items: the synthetic alone)."""
    real = iter(real)
    synthetic = iter(synthetic)
    if ratio is None:
        yield from _alternate(real, synthetic)
        return
    owed = 0.0
    for item in real:
        yield item
        owed += ratio
        while owed >= 1.0:
            owed -= 1.0
            nxt = next(synthetic, None)
            if nxt is None:
                yield from real
                return
            yield nxt


def _alternate(real: Iterator[Any], synthetic: Iterator[Any]) -> Iterator[Any]:
    for pair in itertools.zip_longest(real, synthetic):
        yield from (item for item in pair if item is not None)


class SyntheticPairsProblem(problem_lib.Problem):
    """A text-to-text problem whose train split holds pairs a model made (see the module)."""

    kind: str = "distilled"
    keep_real: bool = False  # P's own train pairs too
    tag_synthetic: bool = False  # a tag token in front of each synthetic input
    synthetic_ratio: float | None = None  # synthetic pairs per real one (None: all of them)

    def __init__(self, base_name: str):
        super().__init__(False)
        self.base = registry.problem(base_name)  # "P_rev" reverses P's pairs, as anywhere
        self.batch_size_means_tokens = self.base.batch_size_means_tokens

    # ---------------------------------------------------------------- naming
    @property
    def base_name(self) -> str:
        return f"{self.kind}:{self.base.name}"

    @property
    def name(self) -> str:
        return self.base_name

    @property
    def splits(self) -> Sequence[problem_lib.SplitSpec]:
        return self.base.splits

    def dataset_filename(self) -> str:
        return f"{self.base.name}_{self.kind}"

    # -------------------------------------------------------------- features
    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        return self.base.feature_encoders(data_dir)

    def problem_hparams(self, data_dir: str | None) -> problem_lib.ProblemHParams:
        import dataclasses

        hparams = self.base.hparams(data_dir)
        if set(hparams.modality) != {"inputs", "targets"} or any(
                m != problem_lib.Modality.SYMBOL for m in hparams.modality.values()):
            raise SyntheticPairsError(
                f"{self.name}: {self.base.name} is not a text-to-text problem (features "
                f"{hparams.modality}); {self.kind} pairs need symbol inputs and targets.")
        if not self.tag_synthetic:
            return dataclasses.replace(hparams, was_reversed=False)
        # One more id, the tag, for every symbol feature (their embeddings may be shared).
        return dataclasses.replace(
            hparams, vocab_size={f: v + 1 for f, v in hparams.vocab_size.items()},
            was_reversed=False)

    def tag_id(self, data_dir: str | None) -> int:
        """The tag's id: the first id after the base vocabulary."""
        return int(self.base.hparams(data_dir).vocab_size["inputs"])

    def eval_metrics(self) -> list[str]:
        return self.base.eval_metrics()

    def example_reading_spec(self) -> dict[str, Any]:
        return self.base.example_reading_spec()

    def max_length(self, model_hparams: Any) -> int:
        return self.base.max_length(model_hparams)

    def preprocess_example(self, example: dict[str, Any], mode: str, model_hparams: Any
                           ) -> dict[str, Any]:
        return self.base.preprocess_example(example, mode, model_hparams)

    # ------------------------------------------------------------ generation
    def generate_data(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None,
                      max_cases: int | None = None, num_shards: int | None = None,
                      progress: bool = True) -> dict[str, generator_utils.SplitSummary]:
        """P's data (skipped where written), then this problem's train shards from the
        pair files in `tmp_dir` (and P's train pairs when keep_real)."""
        self.base.generate_data(data_dir, tmp_dir, mirror=mirror, progress=progress)
        self.problem_hparams(data_dir)  # refuses a problem that is not text to text
        inputs_path, targets_path = pair_files(tmp_dir, self.kind)
        next(read_pairs(inputs_path, targets_path))  # checked before anything is written
        train = next(s for s in self.splits if s.name == problem_lib.TRAIN_SPLIT)
        paths = generator_utils.shard_paths(data_dir, self.dataset_filename(),
                                            problem_lib.TRAIN_SPLIT, num_shards or train.shards)
        generator_utils.write_shards(
            lambda: self._train_examples(data_dir, inputs_path, targets_path), paths,
            max_cases=max_cases, label=f"{self.dataset_filename()} train", progress=progress)
        return self.written_summary(data_dir)

    def _train_examples(self, data_dir: str, inputs_path: str, targets_path: str
                        ) -> Iterator[dict[str, list[int]]]:
        encoders = self.base.feature_encoders(data_dir)
        tag = [self.tag_id(data_dir)] if self.tag_synthetic else []

        def encode(feature: str, text: str) -> list[int]:
            return encoders[feature].encode(text) + [text_encoder.EOS_ID]

        synthetic = ({"inputs": tag + encode("inputs", src), "targets": encode("targets", tgt)}
                     for src, tgt in read_pairs(inputs_path, targets_path))
        real = self._real_examples(data_dir) if self.keep_real else iter(())
        return interleave(real, synthetic, self.synthetic_ratio if self.keep_real else None)

    def _real_examples(self, data_dir: str) -> Iterator[dict[str, list[int]]]:
        dataset = self.base.dataset(problem_lib.TRAIN, data_dir, split=problem_lib.TRAIN_SPLIT,
                                    shuffle_files=False, deterministic=True)
        for example in dataset.as_numpy_iterator():
            yield {"inputs": example["inputs"].tolist(), "targets": example["targets"].tolist()}

    # --------------------------------------------------------------- reading
    def data_files(self, data_dir: str, split: str) -> list[str]:
        if split == problem_lib.TRAIN_SPLIT:
            return super().data_files(data_dir, split)
        return self.base.data_files(data_dir, split)

    def written_summary(self, data_dir: str) -> dict[str, generator_utils.SplitSummary]:
        own = super().written_summary(data_dir)
        return {**self.base.written_summary(data_dir),
                problem_lib.TRAIN_SPLIT: own[problem_lib.TRAIN_SPLIT]}

    def dataset(self, mode: str, data_dir: str, **kwargs: Any) -> tf.data.Dataset:
        split = kwargs.get("split") or self.split_for_mode(mode)
        if split != problem_lib.TRAIN_SPLIT:  # P's own dev and test, read as P reads them
            return self.base.dataset(mode, data_dir, **kwargs)
        return super().dataset(mode, data_dir, **kwargs)


def _make(kind: str):
    def make_problem(name: str) -> SyntheticPairsProblem:
        base = name.split(":", 1)[1]
        cls = type(f"{kind.capitalize()}Pairs", (SyntheticPairsProblem,), {
            "kind": kind, "keep_real": kind == "backtranslated",
            "tag_synthetic": kind == "backtranslated"})
        return cls(base)
    return make_problem


for _kind in KINDS:
    registry.register_problem_combinator(
        f"{_kind}:", _make(_kind), lambda name: SyntheticPairsProblem)
