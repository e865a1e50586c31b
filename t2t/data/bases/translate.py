"""Translation problems: parallel corpora in archives, streamed line by line.

A `TranslateProblem` lists its data declaratively, per split, as `ParallelCorpus`
entries: the `Resource` of an archive and the paths, inside that archive, of a source
file and a target file that are aligned line by line. Like Tensor2Tensor's
`translate.compile_data`, but streaming: `generate_samples` fetches each archive
(through the mirror, if any), extracts it once into `tmp_dir`, and yields
{"inputs": source sentence, "targets": target sentence} pairs while reading both files
in step, so no corpus is ever held in memory.

File formats, chosen by the member's name:
- plain text (any other name), one sentence per line, UTF-8;
- SGML (`.sgm`, as WMT's newstest sets): the text of every `<seg id=...>...</seg>`
  element, with HTML/XML entities unescaped; other lines (`<doc>`, `<p>`, ...) ignored;
- either of those gzip-compressed (`.gz` appended).

A pair is skipped when either side is empty after stripping whitespace. When the two
files of a corpus hold different numbers of lines (segments), `LineCountMismatchError`
names both files and both counts.
"""

from __future__ import annotations

import dataclasses
import gzip
import html
import itertools
import os
import re
from collections.abc import Iterator, Sequence
from typing import IO, NamedTuple

from absl import logging

from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.generation import download, extract


class LineCountMismatchError(ValueError):
    """The source and target files of a parallel corpus are not aligned."""


class ParallelCorpus(NamedTuple):
    """One parallel corpus: an archive and the (source, target) files inside it.

    `files` are paths relative to the archive's root, with `/` separators, e.g.
    `("training-parallel-nc-v13/news-commentary-v13.de-en.en",
    "training-parallel-nc-v13/news-commentary-v13.de-en.de")`.
    """

    resource: download.Resource
    files: Sequence[str]


_SEG_RE = re.compile(r"<seg\b[^>]*>(.*?)</seg\s*>", re.IGNORECASE | re.DOTALL)


def is_sgm(path: str) -> bool:
    """Whether `path` names an SGML file (`.sgm`, optionally gzipped)."""
    return path.lower().removesuffix(".gz").endswith(".sgm")


def _open_text(path: str) -> IO[str]:
    """Opens a UTF-8 text file (gzipped when it ends in .gz); lines end at "\\n" only.

    Splitting only at "\\n" (not at a lone "\\r" or other Unicode line breaks) keeps the
    line numbering that `wc -l` and the corpus authors use. Undecodable bytes become
    U+FFFD rather than stopping a long generation run; a leading BOM is dropped.
    """
    if path.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace", newline="\n")
    return open(path, encoding="utf-8-sig", errors="replace", newline="\n")


def read_segments(path: str) -> Iterator[str]:
    """Yields each aligned unit of `path`, stripped: a line, or a `<seg>` of an .sgm file.

    Empty units are yielded too (as ""), so that two files stay aligned.
    """
    sgm = is_sgm(path)
    with _open_text(path) as f:
        for line in f:
            if sgm:
                for match in _SEG_RE.finditer(line):
                    yield html.unescape(match.group(1)).strip()
            else:
                yield line.strip()


def _count_rest(iterator: Iterator[str]) -> int:
    return sum(1 for _ in iterator)


def parallel_samples(source_path: str, target_path: str) -> Iterator[dict[str, str]]:
    """Yields {"inputs", "targets"} from two aligned files, skipping pairs with an empty side.

    Raises:
      LineCountMismatchError: the files hold different numbers of lines (segments);
        raised when the shorter one ends, after the pairs before it were yielded.
    """
    sources, targets = read_segments(source_path), read_segments(target_path)
    pairs = skipped = 0
    try:
        for source, target in itertools.zip_longest(sources, targets):
            if source is None or target is None:
                source_count = pairs + (1 + _count_rest(sources) if target is None else 0)
                target_count = pairs + (1 + _count_rest(targets) if source is None else 0)
                unit = "segments" if is_sgm(source_path) else "lines"
                raise LineCountMismatchError(
                    f"Parallel files are not aligned: {source_path} has {source_count} "
                    f"{unit} but {target_path} has {target_count}. Each line of one must "
                    f"translate the same line of the other; check the corpus table or "
                    f"re-extract the archive."
                )
            pairs += 1
            if not source or not target:
                skipped += 1
                continue
            yield {"inputs": source, "targets": target}
    finally:
        sources.close()
        targets.close()
    logging.info(
        "Read %d pairs from %s / %s (%d skipped: an empty side).",
        pairs - skipped,
        source_path,
        target_path,
        skipped,
    )


def _archive_stem(name: str) -> str:
    """`training-parallel-nc-v13.tgz` -> `training-parallel-nc-v13`."""
    lower = name.lower()
    for suffix in sorted(extract.SUPPORTED_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _member_path(root: str, member: str, archive: str) -> str:
    """The extracted path of archive member `member`, refusing paths that escape `root`."""
    parts = member.replace("\\", "/").split("/")
    if os.path.isabs(member) or ".." in parts:
        raise ValueError(f"Corpus file {member!r} of {archive} must be a relative path.")
    return os.path.join(root, *[p for p in parts if p not in ("", ".")])


def _missing_member(archive: str, member: str, root: str) -> FileNotFoundError:
    found = []
    for folder, _, names in os.walk(root):
        found += [
            os.path.relpath(os.path.join(folder, n), root) for n in names if not n.startswith(".")
        ]
        if len(found) > 10:
            break
    listing = ", ".join(sorted(found)[:10]) or "nothing"
    return FileNotFoundError(
        f"{archive} has no file {member!r} (extracted into {root}; it holds: {listing}). "
        f"The corpus table of the problem names a file the archive does not contain."
    )


def archive_members(
    resource: download.Resource,
    members: Sequence[str],
    tmp_dir: str,
    mirror: str | None = None,
    *,
    files_only: bool = False,
) -> list[str]:
    """Fetches and extracts `resource` into tmp_dir once; returns the paths of `members`.

    The archive is kept in `tmp_dir`; it is extracted into
    `tmp_dir/<archive name without suffix>/`, once (a marker records completion). A
    missing member (with `files_only`, also one that is not a file) raises
    FileNotFoundError listing what the archive holds.
    """
    archive = download.fetch(resource, tmp_dir, mirror)
    name = os.path.basename(archive)
    root = extract.extract(archive, os.path.join(tmp_dir, _archive_stem(name)))
    found = os.path.isfile if files_only else os.path.exists
    paths = []
    for member in members:
        path = _member_path(root, member, name)
        if not found(path):
            raise _missing_member(name, member, root)
        paths.append(path)
    return paths


def corpus_files(
    corpus: ParallelCorpus, tmp_dir: str, mirror: str | None = None
) -> tuple[str, str]:
    """Fetches and extracts `corpus` into `tmp_dir`; returns its (source, target) paths.

    The archive is kept in `tmp_dir`; it is extracted into
    `tmp_dir/<archive name without suffix>/`, once (a marker records completion).
    """
    if len(corpus.files) != 2:
        raise ValueError(
            f"A ParallelCorpus names exactly 2 files (source, target), got {corpus.files!r}."
        )
    paths = archive_members(corpus.resource, corpus.files, tmp_dir, mirror, files_only=True)
    return paths[0], paths[1]


class TranslateProblem(text_problems.Text2TextProblem):
    """Base of translation problems: subclasses fill in the corpus tables.

    Class attributes to set:
      train_datasets / dev_datasets: ParallelCorpus entries, read in order.
      source_language / target_language: language codes of inputs / targets (for the
        problem's own direction; a `_rev` problem swaps them at read time).
      input_space_id / target_space_id: `problem.SpaceID` hints.
      approx_vocab_size: SentencePiece pieces of the shared source+target vocabulary,
        built from the first `max_samples_for_vocab` training pairs.
    """

    train_datasets: Sequence[ParallelCorpus] = ()
    dev_datasets: Sequence[ParallelCorpus] = ()
    source_language: str = ""
    target_language: str = ""
    input_space_id: int = problem.SpaceID.GENERIC
    target_space_id: int = problem.SpaceID.GENERIC

    vocab_type = text_problems.VOCAB_SUBWORD
    approx_vocab_size = 2**15
    max_samples_for_vocab = 100_000  # pairs, i.e. twice as many texts
    train_shards: int = 10
    dev_shards: int = 1

    @property
    def splits(self) -> tuple[problem.SplitSpec, ...]:  # type: ignore[override]
        return (
            problem.SplitSpec(problem.TRAIN_SPLIT, self.train_shards),
            problem.SplitSpec(problem.DEV_SPLIT, self.dev_shards),
        )

    @property
    def languages(self) -> tuple[str, str]:
        """(inputs language, targets language) as this problem reads them (`_rev` swaps)."""
        pair = (self.source_language, self.target_language)
        return pair[::-1] if self.was_reversed else pair

    def source_data_files(self, split: str) -> Sequence[ParallelCorpus]:
        """The corpora of `split` (train or dev)."""
        if split == problem.TRAIN_SPLIT:
            datasets = self.train_datasets
        elif split == problem.DEV_SPLIT:
            datasets = self.dev_datasets
        else:
            raise ValueError(f"{self.name} has no {split!r} split; use train or dev.")
        if not datasets:
            raise NotImplementedError(f"{type(self).__name__} lists no {split} corpora.")
        return datasets

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, str]]:
        """Yields {"inputs": source, "targets": target} of every corpus of `split`."""
        for corpus in self.source_data_files(split):
            source_path, target_path = corpus_files(corpus, tmp_dir, mirror)
            yield from parallel_samples(source_path, target_path)

    def eval_metrics(self) -> list[str]:
        return [*super().eval_metrics(), "bleu"]

    def problem_hparams(self, data_dir: str | None) -> problem.ProblemHParams:
        hp = super().problem_hparams(data_dir)
        return dataclasses.replace(
            hp, input_space_id=self.input_space_id, target_space_id=self.target_space_id
        )
