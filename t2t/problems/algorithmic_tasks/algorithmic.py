"""Algorithmic problems: identity, shift, reverse, addition, multiplication, sort.

Synthetic sequence-to-sequence tasks that need no download, with Tensor2Tensor's
names and sizes. Symbols are written as text like "1 0 1 1" (one symbol per token,
space separated), so a file of such lines can be fed to the decoder. Token id of symbol
s is s + NUM_RESERVED_TOKENS; every sequence ends with EOS.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Iterator
from typing import Any

import numpy as np

from t2t import registry
from t2t.data import problem
from t2t.data.encoders import text_encoder

_SPLIT_SEEDS = {problem.TRAIN_SPLIT: 1, problem.DEV_SPLIT: 2}


class AlgorithmicProblem(problem.Problem):
    """Base of the algorithmic family: `generator` yields lists of symbol ids."""

    num_symbols: int = 2
    train_length: int = 40  # longest training sequence
    dev_length: int = 400  # longest dev sequence (tests length generalization)
    # Shortest dev input: above train_length, the dev split holds only lengths never
    # seen in training, so its accuracy measures length generalization alone.
    dev_min_length: int = 1
    train_size: int = 100_000
    dev_size: int = 10_000
    train_shards: int = 10
    dev_overlap_by_construction = (
        "both splits draw random sequences over a small alphabet, so short ones repeat "
        "between them; dev accuracy includes those, and a dev split longer than train "
        "(dev_min_length) has none")

    @property
    def num_shards(self) -> int:
        """Train shards (Tensor2Tensor's name for train_shards)."""
        return self.train_shards

    @property
    def splits(self) -> tuple[problem.SplitSpec, ...]:  # type: ignore[override]
        return (
            problem.SplitSpec(problem.TRAIN_SPLIT, self.num_shards),
            problem.SplitSpec(problem.DEV_SPLIT, 1),
        )

    def generator(self, nbr_symbols: int, max_length: int, nbr_cases: int, rng: np.random.Generator) -> Iterator[dict[str, list[int]]]:
        """Yields `nbr_cases` dicts of "inputs"/"targets" symbol lists (0-based).

        Tensor2Tensor's signature, `generator(self, nbr_symbols, max_length,
        nbr_cases)` drawing from Python's `random`, works too: `random` is then seeded
        per problem and split, so a re-run writes the same examples.
        """
        raise NotImplementedError

    def _generate(self, max_length: int, nbr_cases: int, rng: np.random.Generator,
                  seed: list[int]) -> Iterator[dict[str, list[int]]]:
        """`generator`, given `rng` only if it takes a fourth argument (T2T's did not)."""
        parameters = inspect.signature(self.generator).parameters
        varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters.values())
        if len(parameters) >= 4 or "rng" in parameters or varargs:
            return self.generator(self.num_symbols, max_length, nbr_cases, rng)
        random.seed(bytes(seed))
        return self.generator(self.num_symbols, max_length, nbr_cases)

    def num_examples(self, split: str) -> int:
        return self.train_size if split == problem.TRAIN_SPLIT else self.dev_size

    def generate_examples(self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None) -> Iterator[dict[str, Any]]:
        # A fixed seed per problem and split makes a re-run produce the same examples,
        # so shards finished by an interrupted run stay consistent with the new ones.
        seed = [_SPLIT_SEEDS.get(split, 3), *self.dataset_filename().encode()]
        rng = np.random.default_rng(seed)
        for case in self._cases(split, rng, seed):
            yield {
                key: [int(s) + text_encoder.NUM_RESERVED_TOKENS for s in symbols] + [text_encoder.EOS_ID]
                for key, symbols in case.items()
            }

    def _cases(self, split: str, rng: np.random.Generator, seed: list[int]) -> Iterator[dict[str, list[int]]]:
        """The split's num_examples cases; dev inputs shorter than dev_min_length are
        dropped and replaced by further draws (with dev_min_length 1 nothing is)."""
        train = split == problem.TRAIN_SPLIT
        max_length = self.train_length if train else self.dev_length
        min_length = 1 if train else self.dev_min_length
        if min_length > max_length:
            raise ValueError(f"{self.name}: dev_min_length {min_length} exceeds dev_length "
                             f"{max_length}.")
        wanted = self.num_examples(split)
        if min_length <= 1:  # every case is kept (language-model variants have no inputs)
            yield from self._generate(max_length, wanted, rng, seed)
            return
        while wanted > 0:
            for case in self._generate(max_length, wanted, rng, seed):
                if len(case["inputs"]) >= min_length and wanted > 0:
                    wanted -= 1
                    yield case

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        encoder = text_encoder.TokenTextEncoder([str(i) for i in range(self.num_symbols)])
        return {"inputs": encoder, "targets": encoder}

    def problem_hparams(self, data_dir: str | None) -> problem.ProblemHParams:
        vocab_size = self.num_symbols + text_encoder.NUM_RESERVED_TOKENS
        return problem.ProblemHParams(
            modality={"inputs": problem.Modality.SYMBOL, "targets": problem.Modality.SYMBOL},
            vocab_size={"inputs": vocab_size, "targets": vocab_size},
            input_space_id=problem.SpaceID.DIGIT_0,
            target_space_id=problem.SpaceID.DIGIT_1,
        )


def _random_lengths(rng: np.random.Generator, max_length: int, count: int) -> np.ndarray:
    return rng.integers(1, max_length + 1, size=count)


@registry.register_problem
class AlgorithmicIdentityBinary40(AlgorithmicProblem):
    """Copy a random binary sequence of length 1..40."""

    num_symbols = 2

    def generator(self, nbr_symbols, max_length, nbr_cases, rng):
        for length in _random_lengths(rng, max_length, nbr_cases):
            inputs = rng.integers(0, nbr_symbols, size=length).tolist()
            yield {"inputs": inputs, "targets": list(inputs)}


@registry.register_problem
class AlgorithmicIdentityDecimal40(AlgorithmicIdentityBinary40):
    """Copy a random decimal sequence of length 1..40."""

    num_symbols = 10


@registry.register_problem
class AlgorithmicShiftDecimal40(AlgorithmicProblem):
    """Add 10 to every symbol: inputs use symbols 0..9, targets 10..19."""

    num_symbols = 20
    dev_length = 80
    shift = 10

    def generator(self, nbr_symbols, max_length, nbr_cases, rng):
        for length in _random_lengths(rng, max_length, nbr_cases):
            inputs = rng.integers(0, nbr_symbols - self.shift, size=length).tolist()
            yield {"inputs": inputs, "targets": [s + self.shift for s in inputs]}


@registry.register_problem
class AlgorithmicReverseBinary40(AlgorithmicProblem):
    """Reverse a random binary sequence of length 1..40."""

    num_symbols = 2

    def generator(self, nbr_symbols, max_length, nbr_cases, rng):
        for length in _random_lengths(rng, max_length, nbr_cases):
            inputs = rng.integers(0, nbr_symbols, size=length).tolist()
            yield {"inputs": inputs, "targets": inputs[::-1]}


@registry.register_problem
class AlgorithmicReverseDecimal40(AlgorithmicReverseBinary40):
    """Reverse a random decimal sequence of length 1..40."""

    num_symbols = 10


class _SmallTestSizes:
    """Sizes of the `*_test` variants: short sequences, few examples, one shard."""

    train_length = 10
    dev_length = 10
    train_size = 1000
    dev_size = 100
    train_shards = 1


@registry.register_problem
class AlgorithmicReverseBinary40Test(_SmallTestSizes, AlgorithmicReverseBinary40):
    """Small variant of algorithmic_reverse_binary40 for tests and demos: lengths 1..10 only.

    1,000 training examples of length 1..10: a model trained on it has never seen a
    longer input, and reverses one wrongly (the full problem trains lengths 1..40)."""


@registry.register_problem
class AlgorithmicReverseBinary10Dev40(AlgorithmicReverseBinary40):
    """Length generalization: reverse binary sequences of length 1..10 in training and of
    length exactly 40 in dev (4x the longest input a model has seen).

    A t2t addition (Tensor2Tensor's algorithmic problems evaluate on dev lengths up to
    10x the training length, at sizes a CPU cannot train): 10,000 training and 200 dev
    examples, one training shard."""

    train_length = 10
    dev_length = 40
    dev_min_length = 40
    train_size = 10_000
    dev_size = 200
    train_shards = 1


@registry.register_problem
class AlgorithmicIdentityBinary40Test(_SmallTestSizes, AlgorithmicIdentityBinary40):
    """Small variant of algorithmic_identity_binary40: lengths 1..10 only."""


def _lower_endian(number: int, base: int) -> list[int]:
    digits = []
    while True:
        number, digit = divmod(number, base)
        digits.append(digit)
        if number == 0:
            return digits


def _from_lower_endian(digits: list[int], base: int) -> int:
    return sum(d * base**i for i, d in enumerate(digits))


class _ArithmeticProblem(AlgorithmicProblem):
    """Two lower-endian numbers separated by the symbol `base` -> their result.

    The vocabulary counts the separator (num_symbols = base + 1); Tensor2Tensor declared
    num_symbols = base, which put the separator's id one past its vocabulary.
    """

    base = 2

    @property
    def num_symbols(self) -> int:  # type: ignore[override]
        return self.base + 1  # the digits and the separator

    def combine(self, a: int, b: int) -> int:
        raise NotImplementedError

    def _random_number(self, rng: np.random.Generator, length: int) -> list[int]:
        digits = rng.integers(0, self.base, size=length).tolist()
        if length > 1 and digits[-1] == 0:  # no leading zero (lower endian: last digit)
            digits[-1] = int(rng.integers(1, self.base))
        return digits

    def generator(self, nbr_symbols, max_length, nbr_cases, rng):
        if max_length < 3:
            raise ValueError(f"{self.name}: max_length must be >= 3, got {max_length}.")
        for _ in range(nbr_cases):
            l1 = int(rng.integers(0, max_length // 2)) + 1
            l2 = int(rng.integers(0, max_length - l1 - 1)) + 1
            n1, n2 = self._random_number(rng, l1), self._random_number(rng, l2)
            result = self.combine(_from_lower_endian(n1, self.base), _from_lower_endian(n2, self.base))
            yield {"inputs": n1 + [self.base] + n2, "targets": _lower_endian(result, self.base)}


@registry.register_problem
class AlgorithmicAdditionBinary40(_ArithmeticProblem):
    """Add two binary numbers (lower-endian digits, separator symbol 2)."""

    base = 2

    def combine(self, a, b):
        return a + b


@registry.register_problem
class AlgorithmicAdditionDecimal40(AlgorithmicAdditionBinary40):
    """Add two decimal numbers (separator symbol 10)."""

    base = 10


@registry.register_problem
class AlgorithmicMultiplicationBinary40(_ArithmeticProblem):
    """Multiply two binary numbers."""

    base = 2

    def combine(self, a, b):
        return a * b


@registry.register_problem
class AlgorithmicMultiplicationDecimal40(AlgorithmicMultiplicationBinary40):
    """Multiply two decimal numbers."""

    base = 10


@registry.register_problem
class AlgorithmicAdditionBinary40Test(_SmallTestSizes, AlgorithmicAdditionBinary40):
    """Small variant of algorithmic_addition_binary40: up to 10 digits in all."""

    # 10k examples were memorized (dev per-sequence accuracy stuck near 0.15 while the
    # training loss kept falling); 100k take ~10 s to generate and generalize.
    train_size = 100_000
    dev_size = 200


@registry.register_problem
class AlgorithmicSortProblem(AlgorithmicProblem):
    """Sort a sequence of symbols 0..19 (length 1..10 in training, 1..20 in dev)."""

    train_length = 10
    dev_length = 20

    @property
    def num_symbols(self) -> int:  # type: ignore[override]
        return max(self.train_length, self.dev_length)

    def generator(self, nbr_symbols, max_length, nbr_cases, rng):
        for length in _random_lengths(rng, max_length, nbr_cases):
            inputs = rng.integers(0, nbr_symbols, size=length).tolist()
            yield {"inputs": inputs, "targets": sorted(inputs)}
