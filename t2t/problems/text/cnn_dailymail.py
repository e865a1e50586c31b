"""CNN / Daily Mail abstractive summarization, as Tensor2Tensor's `summarize_cnn_dailymail32k`.

Data (non-anonymized version, See et al. 2017), five files pinned to the sizes and
sha256 that TensorFlow Datasets records (`tensorflow_datasets/url_checksums/
cnn_dailymail.txt`):

- `cnn_stories.tgz` (159 MB; `cnn/stories/<sha1>.story`, ~92.6k stories) and
  `dailymail_stories.tgz` (376 MB; `dailymail/stories/<sha1>.story`, ~219.5k), from
  Kyunghyun Cho's Google Drive folder (https://cs.nyu.edu/~kcho/DMQA/). Google Drive
  answers a plain download of files this large with an HTML confirmation page, which
  fails the checksum: put the two archives on a mirror (--data_mirror) or in tmp_dir.
- `all_train.txt`, `all_val.txt`, `all_test.txt`: the article URLs of each split, from
  the abisee/cnn-dailymail repository (raw.githubusercontent.com).

Splits, by the standard script's rule: a URL's story is `<sha1 hex of the URL>.story`
in either archive; train = all_train (287,227 URLs; ~287.1k examples), dev = all_val
(13,368), test = all_test (11,490). Examples follow the URL lists' order; a URL whose
story is missing is logged and skipped, as is a story without article or highlights.

Each story becomes {"inputs": article, "targets": summary} as in the abisee script and
TensorFlow Datasets (cased, v3): lines stripped, a period added to a line that does
not end in punctuation (captions run on otherwise), the lines after each `@highlight`
marker are the highlights; the article is its other lines joined with spaces and the
summary the highlights joined with spaces. Articles are kept whole (~780 words on
average); truncate at training time (hparams.max_length) if needed.

Vocabulary: SentencePiece, ~32k pieces shared by articles and summaries, trained on
up to 2 x `max_samples_for_vocab` texts from the first training stories: each
article cut at spaces into pieces of at most 2,000 characters (SentencePiece skips
longer sentences), then its summary.

Metrics: the per-token ones, and at decode time ROUGE-2 F and ROUGE-L F
(`t2t.decoding.text_metrics.rouge_scores`, Google's `rouge-score` package).
Append `_rev` for the (unusual) summary -> article direction.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence

from absl import logging

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.bases.translate import archive_members
from t2t.data.generation import download
from t2t.data.generation.download import Resource

CNN_STORIES = Resource(
    url="https://drive.google.com/uc?export=download&id=0BwmD_VLjROrfTHk4NFg2SndKcjQ",
    filename="cnn_stories.tgz",
    size=158577824,
    sha256="e8fbc0027e54e0a916abd9c969eb35f708ed1467d7ef4e3b17a56739d65cb200",
)
DAILYMAIL_STORIES = Resource(
    url="https://drive.google.com/uc?export=download&id=0BwmD_VLjROrfM1BxdkxVaTY2bWs",
    filename="dailymail_stories.tgz",
    size=375893739,
    sha256="ad69010002210b7c406718248ee66e65868b9f6820f163aa966369878d14147e",
)
_URL_LISTS = "https://raw.githubusercontent.com/abisee/cnn-dailymail/master/url_lists/"
TRAIN_URLS = Resource(
    url=_URL_LISTS + "all_train.txt",
    size=46424688,
    sha256="a5cee49f3a6c862c26ce29308236d2a99625ab6c86a43be22d5206b2790d8029",
)
VAL_URLS = Resource(
    url=_URL_LISTS + "all_val.txt",
    size=2433674,
    sha256="81887e982b045083409c6ee838aede8ff4b97291605bcfb21bffc456a16991db",
)
TEST_URLS = Resource(
    url=_URL_LISTS + "all_test.txt",
    size=2109547,
    sha256="c4f5efb5ec2126430a5c156efbd13d0e9c4cb490169e552c38b4a51981a009bd",
)
# (archive, folder of stories inside it)
STORY_ARCHIVES = ((CNN_STORIES, "cnn/stories"), (DAILYMAIL_STORIES, "dailymail/stories"))
SPLIT_URLS = {
    problem.TRAIN_SPLIT: TRAIN_URLS,
    problem.DEV_SPLIT: VAL_URLS,
    problem.TEST_SPLIT: TEST_URLS,
}

# A line ending in one of these is a complete sentence (the abisee script's list).
END_TOKENS = (".", "!", "?", "...", "'", "`", '"', "\u2019", "\u201d", ")")
HIGHLIGHT = "@highlight"
VOCAB_CHUNK_CHARS = 2000


def url_hash(url: str) -> str:
    """The sha1 hex digest of a URL: its story's file name without `.story`."""
    return hashlib.sha1(url.encode("utf-8")).hexdigest()


def _fix_missing_period(line: str) -> str:
    if HIGHLIGHT in line or not line or line.endswith(END_TOKENS):
        return line
    return line + "."


def parse_story(text: str) -> tuple[str, str]:
    """(article, summary) of a `.story` file's text; either may be empty."""
    article, highlights = [], []
    next_is_highlight = False
    for raw in text.split("\n"):
        line = _fix_missing_period(raw.strip())
        if not line:
            continue
        if line.startswith(HIGHLIGHT):
            next_is_highlight = True
        elif next_is_highlight:
            highlights.append(line)
        else:
            article.append(line)
    return " ".join(article), " ".join(highlights)


def text_chunks(text: str, limit: int = VOCAB_CHUNK_CHARS) -> Iterator[str]:
    """`text` cut at spaces into pieces of at most `limit` characters (a longer word alone)."""
    piece: list[str] = []
    size = 0
    for word in text.split():
        if piece and size + 1 + len(word) > limit:
            yield " ".join(piece)
            piece, size = [], 0
        size += len(word) + (1 if piece else 0)
        piece.append(word)
    if piece:
        yield " ".join(piece)


@registry.register_problem
class SummarizeCnnDailymail32k(text_problems.Text2TextProblem):
    """CNN/Daily Mail article -> highlights; train/dev/test by the URL lists; ~32k vocab."""

    story_archives: Sequence[tuple[Resource, str]] = STORY_ARCHIVES
    split_urls: dict[str, Resource] = SPLIT_URLS

    vocab_type = text_problems.VOCAB_SUBWORD
    approx_vocab_size = 2**15  # 32768
    max_samples_for_vocab = 10_000  # x2 texts (article pieces and summaries)
    vocab_chunk_chars = VOCAB_CHUNK_CHARS
    splits = (
        problem.SplitSpec(problem.TRAIN_SPLIT, 10),
        problem.SplitSpec(problem.DEV_SPLIT, 1),
        problem.SplitSpec(problem.TEST_SPLIT, 1),
    )

    def story_folders(self, tmp_dir: str, mirror: str | None) -> list[str]:
        """The extracted story folders (CNN's, Daily Mail's), fetching the archives once."""
        folders = []
        for resource, folder in self.story_archives:
            folders += archive_members(resource, [folder], tmp_dir, mirror)
        return folders

    def split_url_list(self, tmp_dir: str, split: str, mirror: str | None) -> list[str]:
        if split not in self.split_urls:
            raise ValueError(f"{self.name} has no {split!r} split; use train, dev or test.")
        path = download.fetch(self.split_urls[split], tmp_dir, mirror)
        with open(path, encoding="utf-8") as f:
            return [line.strip() for line in f if line.strip()]

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, str]]:
        urls = self.split_url_list(tmp_dir, split, mirror)
        folders = self.story_folders(tmp_dir, mirror)
        missing = empty = 0
        for url in urls:
            name = url_hash(url) + ".story"
            path = next(
                (p for p in (os.path.join(f, name) for f in folders) if os.path.isfile(p)), None
            )
            if path is None:
                missing += 1
                if missing <= 5:
                    logging.warning("%s: no story %s for %s", self.name, name, url)
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                article, summary = parse_story(f.read())
            if not article or not summary:
                empty += 1
                continue
            yield {"inputs": article, "targets": summary}
        logging.info(
            "%s %s: %d URLs; %d without a story, %d without article or highlights.",
            self.name,
            split,
            len(urls),
            missing,
            empty,
        )

    def text_for_vocab(self, data_dir: str, tmp_dir: str, mirror: str | None) -> Iterator[str]:
        samples = self.generate_samples(data_dir, tmp_dir, problem.TRAIN_SPLIT, mirror=mirror)
        for count, sample in enumerate(samples):
            if count >= self.max_samples_for_vocab:
                return
            yield from text_chunks(sample["inputs"], self.vocab_chunk_chars)
            yield from text_chunks(sample["targets"], self.vocab_chunk_chars)

    def eval_metrics(self) -> list[str]:
        return [*super().eval_metrics(), "rouge_2", "rouge_l"]

    def problem_hparams(self, data_dir: str | None) -> problem.ProblemHParams:
        hp = super().problem_hparams(data_dir)
        hp.input_space_id = problem.SpaceID.EN_TOK
        hp.target_space_id = problem.SpaceID.EN_TOK
        return hp
