"""Language models over a user's own text files, and over the standard library's docstrings.

`TextFilesLanguageModelProblem` turns a folder (or glob) of `.txt` / `.txt.gz` files
into train, dev and test splits of language-model examples:

- The corpus: `corpus_pattern`, a glob (`**` allowed) or a folder (then every `*.txt`
  and `*.txt.gz` below it), relative patterns resolved against `tmp_dir` (so the
  registered problems read the files under `--tmp_dir`). Files are read in path order;
  `.gz` files through gzip; bytes that are not UTF-8 become U+FFFD (one warning per
  file); empty files are skipped.
- Documents: one per file (`document_unit = "file"`) or one per non-blank line
  (`"line"`, the line without its line end).
- Splits, by document and with a fixed seed: a document's split is a function of
  (`split_seed`, its identity) only: identity = its path relative to the pattern's
  base folder (the folder itself, or the part of the glob before the first wildcard),
  plus `:<line number>` (1-based) for line documents. The blake2b hash of both, read
  as a number u in [0, 1), puts it in dev if u < `dev_fraction`, in test if
  u < `dev_fraction + test_fraction`, else in train. So the split of a file does not
  depend on which other files exist, and generation streams (one document in memory).
  Tiny corpora: when, with at least 3 documents, this leaves a split empty (only
  likely with tens of documents: a streaming pass over the identities stops as soon
  as every split has one), each empty split (dev, test, then train) takes the
  document with the smallest split-specific hash from a split that has two or more.
- Examples: each document is encoded whole and its ids cut into chunks of
  `max_example_length - 1` tokens; EOS ends every chunk (so an example has at most
  `max_example_length` ids and a document's chunks, EOS removed, concatenate back to
  the document's ids). `documents(tmp_dir, split)` yields exactly the texts the
  split's examples are made of, in order. The default, 256, is the `max_length` of
  the Transformer hparams sets: their length filter keeps every example (a longer
  `max_example_length` needs `--hparams=max_length=` at least as long, or the trainer
  drops the longer examples and says so).
- Vocabulary: bytes (`vocab_type` "byte", 258 ids, no file) or SentencePiece
  ("subword", `approx_vocab_size` pieces, trained on the train split's lines only).

Registered: `languagemodel_text_files` (bytes, one document per file, every
.txt/.txt.gz under --tmp_dir), `languagemodel_text_files_lines` (one per line),
`languagemodel_text_files_sp8k` (SentencePiece ~8k) and
`languagemodel_python_docstrings`, a real English corpus found offline on every
machine with Python: the module, class and function docstrings of the running
interpreter's standard library, one document per module, bytes, 256-token examples.

Imports no TensorFlow.
"""

from __future__ import annotations

import ast
import glob
import gzip
import hashlib
import heapq
import itertools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

from absl import logging

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.encoders import text_encoder
from t2t.data.encoders.vocab_files import atomic_write

FILE = "file"
LINE = "line"
SPLIT_NAMES = (problem.TRAIN_SPLIT, problem.DEV_SPLIT, problem.TEST_SPLIT)
_WILDCARDS = "*?["
# SentencePiece skips sentences longer than its max_sentence_length (4192 bytes).
_VOCAB_PIECE_CHARS = 1000


# ------------------------------------------------------------------ corpus files
def resolve_pattern(pattern: str, tmp_dir: str) -> tuple[str, str]:
    """(absolute glob or folder, its base folder) for `pattern` resolved against tmp_dir."""
    resolved = os.path.abspath(os.path.join(tmp_dir, os.path.expanduser(pattern)))
    if not any(c in resolved for c in _WILDCARDS):
        return resolved, resolved if os.path.isdir(resolved) else os.path.dirname(resolved)
    parts = resolved.split(os.sep)
    first = next(i for i, part in enumerate(parts) if any(c in part for c in _WILDCARDS))
    return resolved, os.sep.join(parts[:first]) or os.sep


def find_files(pattern: str, tmp_dir: str) -> tuple[str, list[str]]:
    """(base folder, the matching files sorted by path); DataMissingError if none."""
    resolved, base = resolve_pattern(pattern, tmp_dir)
    if os.path.isdir(resolved):
        found = [
            *glob.glob(os.path.join(resolved, "**", "*.txt"), recursive=True),
            *glob.glob(os.path.join(resolved, "**", "*.txt.gz"), recursive=True),
        ]
    else:
        found = glob.glob(resolved, recursive=True)
    files = sorted({f for f in found if os.path.isfile(f)})
    if not files:
        raise problem.DataMissingError(
            f"No text files match corpus_pattern {pattern!r} (resolved against tmp_dir "
            f"{os.path.abspath(tmp_dir)!r} to {resolved!r}; a folder means every *.txt and "
            f"*.txt.gz below it). Put .txt files under --tmp_dir or set corpus_pattern."
        )
    return base, files


def _identity(path: str, base: str) -> str:
    return os.path.relpath(path, base).replace(os.sep, "/")


def _open_binary(path: str) -> Any:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


_WARNED_FILES: set[str] = set()  # files already reported as not UTF-8 (one warning each)


def _decode(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if path not in _WARNED_FILES:
            _WARNED_FILES.add(path)
            logging.warning("%s is not valid UTF-8 (%s); undecodable bytes become U+FFFD.", path, e)
        return data.decode("utf-8", errors="replace")


def read_text(path: str) -> str:
    """A file's whole text (gzip for `.gz`); bad UTF-8 replaced, one warning per file."""
    with _open_binary(path) as f:
        return _decode(f.read(), path)


def read_lines(path: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text without line end) of each non-blank line, streamed."""
    with _open_binary(path) as f:
        for number, raw in enumerate(f, start=1):
            line = _decode(raw, path).rstrip("\r\n")
            if line.strip():
                yield number, line


def _is_empty(path: str) -> bool:
    if os.path.getsize(path) == 0:
        return True
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            return not f.read(1)
    return False


# ---------------------------------------------------------------------- splits
def split_key(seed: int, identity: str, salt: str = "") -> float:
    """A number in [0, 1) from the hash of (seed, salt, a document's identity)."""
    digest = hashlib.blake2b(f"{seed}\0{salt}\0{identity}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def hash_split(seed: int, identity: str, dev_fraction: float, test_fraction: float) -> str:
    """The split of a document by its hash alone (no tiny-corpus repair)."""
    u = split_key(seed, identity)
    if u < dev_fraction:
        return problem.DEV_SPLIT
    if u < dev_fraction + test_fraction:
        return problem.TEST_SPLIT
    return problem.TRAIN_SPLIT


def plan_splits(
    identities: Iterable[str], seed: int, dev_fraction: float, test_fraction: float
) -> dict[str, str]:
    """Identity -> split for the documents the tiny-corpus rule moves (usually none).

    Streams `identities`, stopping once every split has a document; memory is bounded
    (the 3 smallest split-specific keys per split).
    """
    counts = dict.fromkeys(SPLIT_NAMES, 0)
    best: dict[str, list[tuple[float, str, str]]] = {s: [] for s in SPLIT_NAMES}
    total = 0
    for identity in identities:
        split = hash_split(seed, identity, dev_fraction, test_fraction)
        counts[split] += 1
        total += 1
        if all(counts.values()):
            return {}
        for target in SPLIT_NAMES:
            entry = (-split_key(seed, identity, target), identity, split)
            heap = best[target]  # a max-heap (negated keys) of the 3 smallest keys
            if len(heap) < 3:
                heapq.heappush(heap, entry)
            else:
                heapq.heappushpop(heap, entry)
    if total < 3:
        logging.warning("Only %d document(s): some splits stay empty.", total)
        return {}
    moved: dict[str, str] = {}
    for target in (problem.DEV_SPLIT, problem.TEST_SPLIT, problem.TRAIN_SPLIT):
        if counts[target]:
            continue
        for _, identity, split in sorted(best[target], reverse=True):
            source = moved.get(identity, split)
            if counts[source] >= 2:
                counts[source] -= 1
                counts[target] += 1
                moved[identity] = target
                break
    return moved


# ------------------------------------------------------------------- the problem
class TextFilesLanguageModelProblem(text_problems.Text2SelfProblem):
    """A language model over text files (`corpus_pattern`, resolved against tmp_dir).

    Subclasses set `corpus_pattern` and may change: `document_unit` ("file" or
    "line"), `dev_fraction`, `test_fraction`, `split_seed`, `max_example_length`
    (tokens per example, EOS included; EOS ends every chunk of a document),
    `vocab_type` (byte or subword) and `approx_vocab_size`. See the module docstring
    for how documents are split and cut.
    """

    corpus_pattern: str = ""
    document_unit: str = FILE
    dev_fraction: float = 0.05
    test_fraction: float = 0.05
    split_seed: int = 1234
    max_example_length: int = 256  # transformer sets' max_length keeps every example

    vocab_type = text_problems.VOCAB_BYTE
    approx_vocab_size = 8000
    splits = (
        problem.SplitSpec(problem.TRAIN_SPLIT, 10),
        problem.SplitSpec(problem.DEV_SPLIT, 1),
        problem.SplitSpec(problem.TEST_SPLIT, 1),
    )

    def prepare_corpus(self, tmp_dir: str) -> None:
        """Builds the text files, for problems that make their own corpus (no-op here)."""

    def corpus_files(self, tmp_dir: str) -> tuple[str, list[str]]:
        """(base folder, the corpus files in path order)."""
        if not self.corpus_pattern:
            raise ValueError(f"{self.name}: set corpus_pattern (a glob or a folder).")
        if self.document_unit not in (FILE, LINE):
            raise ValueError(f"{self.name}: document_unit must be {FILE!r} or {LINE!r}.")
        if self.dev_fraction < 0 or self.test_fraction < 0 or (
            self.dev_fraction + self.test_fraction >= 1
        ):
            raise ValueError(f"{self.name}: need 0 <= dev_fraction, test_fraction and a sum < 1.")
        self.prepare_corpus(tmp_dir)
        return find_files(self.corpus_pattern, tmp_dir)

    def _identities(self, base: str, files: list[str]) -> Iterator[str]:
        for path in files:
            if self.document_unit == FILE:
                if not _is_empty(path):
                    yield _identity(path, base)
            else:
                for number, _ in read_lines(path):
                    yield f"{_identity(path, base)}:{number}"

    def documents(self, tmp_dir: str, split: str) -> Iterator[str]:
        """The raw text of each document of `split`, in corpus order (streamed)."""
        if split not in SPLIT_NAMES:
            raise ValueError(f"{self.name} has no {split!r} split; use train, dev or test.")
        base, files = self.corpus_files(tmp_dir)
        seed, dev, test = self.split_seed, self.dev_fraction, self.test_fraction
        moved = plan_splits(self._identities(base, files), seed, dev, test)
        if not moved and next(self._identities(base, files), None) is None:
            raise problem.DataMissingError(
                f"{self.name}: the {len(files)} file(s) matching {self.corpus_pattern!r} "
                f"under {os.path.abspath(tmp_dir)!r} are all empty."
            )

        def split_of(identity: str) -> str:
            return moved.get(identity) or hash_split(seed, identity, dev, test)

        for path in files:
            rel = _identity(path, base)
            if self.document_unit == FILE:
                if split_of(rel) == split and not _is_empty(path):
                    yield read_text(path)
                continue
            for number, line in read_lines(path):
                if split_of(f"{rel}:{number}") == split:
                    yield line

    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        """Builds the corpus if needed, checks that files match, then the vocabulary."""
        self.corpus_files(tmp_dir)
        super().prepare(data_dir, tmp_dir, mirror=mirror)

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, str]]:
        for text in self.documents(tmp_dir, split):
            yield {"targets": text}

    def text_for_vocab(self, data_dir: str, tmp_dir: str, mirror: str | None) -> Iterator[str]:
        """The train split's non-blank lines (long ones in pieces), at most max_samples_for_vocab."""

        def pieces() -> Iterator[str]:
            for text in self.documents(tmp_dir, problem.TRAIN_SPLIT):
                for line in text.splitlines():
                    for i in range(0, len(line), _VOCAB_PIECE_CHARS):
                        if line[i : i + _VOCAB_PIECE_CHARS].strip():
                            yield line[i : i + _VOCAB_PIECE_CHARS]

        return itertools.islice(pieces(), self.max_samples_for_vocab)

    def chunk_ids(self, ids: list[int]) -> Iterator[list[int]]:
        """`ids` cut into chunks of max_example_length - 1 ids, each followed by EOS."""
        size = self.max_example_length - 1
        if size < 1:
            raise ValueError(f"{self.name}: max_example_length must be >= 2.")
        for start in range(0, len(ids), size):
            yield ids[start : start + size] + [text_encoder.EOS_ID]

    def generate_examples(self, data_dir, tmp_dir, split, *, mirror=None):
        encoder = self.get_or_create_vocab(data_dir, tmp_dir, mirror)
        for sample in self.generate_samples(data_dir, tmp_dir, split, mirror=mirror):
            for chunk in self.chunk_ids(encoder.encode(sample["targets"])):
                yield {"targets": chunk}


@registry.register_problem("languagemodel_text_files")
class LanguagemodelTextFiles(TextFilesLanguageModelProblem):
    """Your own text: every .txt/.txt.gz under --tmp_dir, one document per file, bytes."""

    corpus_pattern = "."


@registry.register_problem("languagemodel_text_files_lines")
class LanguagemodelTextFilesLines(LanguagemodelTextFiles):
    """Your own text: every .txt/.txt.gz under --tmp_dir, one document per line, bytes."""

    document_unit = LINE


@registry.register_problem("languagemodel_text_files_sp8k")
class LanguagemodelTextFilesSp8k(LanguagemodelTextFiles):
    """Your own text: every .txt/.txt.gz under --tmp_dir, one document per file, ~8k pieces."""

    vocab_type = text_problems.VOCAB_SUBWORD
    approx_vocab_size = 8000


# ------------------------------------------------------- standard-library docstrings
DOCSTRINGS_FOLDER = "python_docstrings"
MANIFEST = "MANIFEST.json"
MIN_MODULE_BYTES = 200
EXCLUDED_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "__pycache__"})
_CORPUS_FORMAT = 1


def stdlib_dir() -> str:
    """The running interpreter's standard library folder."""
    return sysconfig.get_paths()["stdlib"]


def stdlib_modules(stdlib: str) -> Iterator[str]:
    """Paths of the stdlib's .py files (sorted), without test/, tests/, idlelib/, ..."""
    for folder, dirs, names in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in EXCLUDED_DIRS)
        for name in sorted(names):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def module_docstrings(source: bytes | str) -> list[str]:
    """The module, class and function docstrings of Python source, in source order."""
    tree = ast.parse(source)
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc and doc.strip():
                found.append(doc.strip())
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def module_text(path: str) -> str | None:
    """A module's docstrings as one text, or None if it does not parse."""
    try:
        with open(path, "rb") as f:
            docs = module_docstrings(f.read())
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, OSError) as e:
        logging.warning("Skipping %s: it does not parse (%s).", path, e)
        return None
    return "\n\n".join(docs) + "\n" if docs else ""


def build_docstring_corpus(stdlib: str, out_dir: str) -> dict[str, Any]:
    """Writes one `.txt` of docstrings per stdlib module into out_dir; returns the manifest.

    Mirrors module paths (`email/parser.py` -> `email/parser.txt`), skips modules with
    fewer than 200 bytes of docstrings. Does nothing when out_dir's manifest records
    this Python and stdlib; otherwise builds a new folder and swaps it in atomically.
    """
    wanted = {"format": _CORPUS_FORMAT, "python": sys.version, "stdlib": os.path.abspath(stdlib)}
    manifest_path = os.path.join(out_dir, MANIFEST)
    if os.path.isfile(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
        if all(manifest.get(k) == v for k, v in wanted.items()):
            return manifest
        logging.info("Rebuilding %s: it was made by another Python or stdlib.", out_dir)
    if not os.path.isdir(stdlib):
        raise problem.DataMissingError(f"No standard library folder at {stdlib!r}.")
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(out_dir)}.")
    try:
        modules = total = 0
        for path in stdlib_modules(stdlib):
            text = module_text(path)
            if text is None or len(text.encode("utf-8")) < MIN_MODULE_BYTES:
                continue
            rel = os.path.relpath(path, stdlib)[: -len(".py")] + ".txt"
            atomic_write(os.path.join(staging, rel), text.encode("utf-8"))
            modules += 1
            total += len(text.encode("utf-8"))
        manifest = {**wanted, "modules": modules, "bytes": total}
        atomic_write(os.path.join(staging, MANIFEST), json.dumps(manifest, indent=1).encode())
        old = None
        if os.path.exists(out_dir):
            old = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(out_dir)}.old.")
            os.replace(out_dir, os.path.join(old, "corpus"))
        os.replace(staging, out_dir)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)
    logging.info("Wrote %d modules (%d bytes) of docstrings to %s", modules, total, out_dir)
    return manifest


@registry.register_problem("languagemodel_python_docstrings")
class LanguagemodelPythonDocstrings(TextFilesLanguageModelProblem):
    """The docstrings of Python's standard library, one document per module, bytes."""

    corpus_pattern = DOCSTRINGS_FOLDER
    max_example_length = 256
    stdlib: str | None = None  # None: the running interpreter's (sysconfig)

    def prepare_corpus(self, tmp_dir: str) -> None:
        """Extracts the docstrings into tmp_dir/python_docstrings/ unless already there."""
        build_docstring_corpus(self.stdlib or stdlib_dir(), os.path.join(tmp_dir, DOCSTRINGS_FOLDER))


# ------------------------------------------------------------------ compression
def xz_bits_per_byte(text: str) -> float:
    """8 * (size of `xz -9 -c` of text's UTF-8) / (its size): a compression baseline."""
    data = text.encode("utf-8")
    if not data:
        raise ValueError("xz_bits_per_byte needs non-empty text.")
    xz = shutil.which("xz")
    if xz is None:
        raise FileNotFoundError("xz is not on PATH: install xz-utils (apt-get install xz-utils).")
    result = subprocess.run([xz, "-9", "-c"], input=data, capture_output=True, check=True)
    return 8 * len(result.stdout) / len(data)
