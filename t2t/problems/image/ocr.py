"""Image to text made offline: lines of real English rendered with real fonts.

`ocr_rendered_text` needs no download. Its text is real prose: the plain sentences of the
standard library's docstrings (t2t.problems.text.sentences), case kept, wrapped at word
boundaries into lines of at most `max_line_chars` characters, as a page's lines are.
Each line is drawn with Pillow into a 32 x 384 grayscale strip: a font face, a size
(14-18 px, smaller if the line would not fit), a position (left margin, baseline jitter),
a paper and an ink level at least 128 apart (dark on light or light on dark), and
Gaussian noise with a standard deviation of up to 12 levels, all drawn by a seeded
generator. Targets are the line's UTF-8 bytes (ByteTextEncoder) ending with EOS.

Splits, so that reading must generalize: sentences are dealt by a hash of their text
(t2t.problems.text.sentences.held_out), 90% to training; every line of a sentence goes with
it, and a training line that a held-out sentence also has (e.g. "Return the") is left
out. `train`: held-in lines in TRAIN_FONTS (8 DejaVu faces, Debian `fonts-dejavu-core`
and `fonts-dejavu-extra`).
`dev`: held-out lines in DEV_FONTS (Liberation Sans, Serif and Mono, Debian
`fonts-liberation`), faces never seen in training (the unseen-font figure). `test`:
held-out lines in TRAIN_FONTS (new text, known faces). Metrics: per-sequence accuracy
(teacher-forced, which equals greedy exact match) and the character error rate of greedy
decodes at each evaluation.
"""

from __future__ import annotations

import functools
import os
import textwrap
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from t2t import registry
from t2t.data import problem
from t2t.data.bases import image_problems
from t2t.data.encoders import text_encoder
from t2t.problems.image import mscoco
from t2t.problems.text import sentences
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

FONT_DIRS = ("/usr/share/fonts/truetype", "/usr/share/fonts", "/usr/local/share/fonts",
             "/Library/Fonts", "C:/Windows/Fonts")
# (file name, Debian package) of the faces of each split.
TRAIN_FONTS = tuple((name, "fonts-dejavu-extra" if "Oblique" in name else "fonts-dejavu-core")
                    for name in (
    "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf",
    "DejaVuSans-BoldOblique.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf",
    "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf"))
DEV_FONTS = tuple((name, "fonts-liberation") for name in (
    "LiberationSans-Regular.ttf", "LiberationSerif-Regular.ttf", "LiberationMono-Regular.ttf"))
MIN_FONT_PX = 10  # the smallest size a line is shrunk to before it counts as too wide


class FontMissingError(problem.DataMissingError):
    """A font file of the problem is not installed."""


class TextTooWideError(ValueError):
    """A line does not fit the strip even at MIN_FONT_PX."""


def find_font(file_name: str, package: str, font_dirs: Sequence[str] = FONT_DIRS) -> str:
    """The path of the font `file_name` under `font_dirs` (searched recursively), or
    FontMissingError naming the package that installs it."""
    for root in font_dirs:
        if os.path.isfile(os.path.join(root, file_name)):
            return os.path.join(root, file_name)
        for folder, _, files in os.walk(root) if os.path.isdir(root) else ():
            if file_name in files:
                return os.path.join(folder, file_name)
    raise FontMissingError(
        f"font {file_name} is not installed (looked under {', '.join(font_dirs)}): install "
        f"it with `apt-get install {package}` (Debian/Ubuntu), or copy the .ttf file into "
        f"one of those folders.")


@functools.lru_cache(maxsize=256)
def _font(path: str, size: int) -> Any:
    return ImageFont.truetype(path, size)


def render_line(text: str, font_path: str, size: int, height: int = 32, width: int = 384, *,
                x: int = 2, y_jitter: int = 0, paper: int = 255, ink: int = 0,
                noise_std: float = 0.0, rng: np.random.Generator | None = None) -> np.ndarray:
    """uint8 [height, width, 1]: `text` drawn in `font_path` at `size` px (shrunk down to
    MIN_FONT_PX until it fits), `x` px from the left, vertically centred + `y_jitter`
    px, `ink` on `paper` (0-255), plus Gaussian noise of std `noise_std` levels."""
    for px in range(size, MIN_FONT_PX - 1, -1):
        font = _font(font_path, px)
        left, top, right, bottom = font.getbbox(text)
        if x + right - left <= width - 2 and bottom - top <= height:
            break
    else:
        raise TextTooWideError(
            f"{text!r} ({len(text)} characters) does not fit {width} px in "
            f"{os.path.basename(font_path)} even at {MIN_FONT_PX} px: use shorter lines "
            f"(max_line_chars) or a wider image (image_width).")
    canvas = Image.new("L", (width, height), color=paper)
    y = (height - (bottom - top)) // 2 - top + y_jitter
    y = min(max(y, -top), height - bottom)  # keep the glyphs inside the strip
    ImageDraw.Draw(canvas).text((x - left, y), text, fill=ink, font=font)
    pixels = np.asarray(canvas, np.float32)
    if noise_std:
        pixels = pixels + (rng or np.random.default_rng()).normal(0.0, noise_std, pixels.shape)
    return np.clip(np.round(pixels), 0, 255).astype(np.uint8)[:, :, None]


def wrapped_lines(text_sentences: Sequence[str], max_chars: int) -> list[tuple[str, str]]:
    """[(line, its sentence)]: each sentence wrapped at word boundaries into lines of at
    most `max_chars` characters (a longer word is left out with its sentence)."""
    lines = []
    for sentence in text_sentences:
        wrapped = textwrap.wrap(sentence, max_chars, break_long_words=False)
        if all(len(line) <= max_chars for line in wrapped):
            lines.extend((line, sentence) for line in wrapped)
    return lines


@registry.register_problem("ocr_rendered_text")
class OcrRenderedText(mscoco.Image2TextProblem):
    """Lines of real English rendered in 32 x 384 grayscale strips -> their text."""

    image_height, image_width = 32, 384
    num_channels = 1
    max_line_chars = 36
    font_sizes = (14, 18)  # px, inclusive
    max_noise_std = 12.0
    min_contrast = 128  # paper and ink levels at least this far apart
    num_train_examples = 20000
    num_eval_examples = 500  # of dev and of test
    train_shards = 4
    dev_shards = 1
    font_dirs: Sequence[str] = FONT_DIRS
    stdlib: str | None = None  # another standard library folder (tests)

    @property
    def splits(self) -> tuple[problem.SplitSpec, ...]:  # type: ignore[override]
        return (problem.SplitSpec(problem.TRAIN_SPLIT, self.train_shards),
                problem.SplitSpec(problem.DEV_SPLIT, self.dev_shards),
                problem.SplitSpec(problem.TEST_SPLIT, self.dev_shards))

    @property
    def image_shape(self) -> list[int | None]:
        return [self.image_height, self.image_width, self.num_channels]

    @property
    def model_image_shape(self) -> list[int]:
        return [self.image_height, self.image_width, self.num_channels]

    def lines(self, split: str) -> list[str]:
        """The text lines of `split`: the held-in sentences' lines for train (less any
        line that a held-out sentence also has), the held-out sentences' lines else."""
        corpus = sentences.docstring_sentences(self.stdlib, lowercase=False)
        held = [line for line, _ in wrapped_lines(
            [s for s in corpus if sentences.held_out(s)], self.max_line_chars)]
        if split != problem.TRAIN_SPLIT:
            return held
        unseen = set(held)
        return [line for line, _ in wrapped_lines(
            [s for s in corpus if not sentences.held_out(s)], self.max_line_chars)
            if line not in unseen]

    def fonts(self, split: str) -> list[str]:
        """Paths of the faces `split` is rendered in (FontMissingError if one is absent)."""
        faces = DEV_FONTS if split == problem.DEV_SPLIT else TRAIN_FONTS
        return [find_font(name, package, self.font_dirs) for name, package in faces]

    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        for split in (problem.TRAIN_SPLIT, problem.DEV_SPLIT):
            self.fonts(split)  # fail before any shard is written

    def num_examples(self, split: str) -> int:
        return self.num_train_examples if split == problem.TRAIN_SPLIT else self.num_eval_examples

    def render(self, line: str, font_path: str, rng: np.random.Generator) -> np.ndarray:
        """One uint8 [32, 384, 1] strip of `line` in `font_path`, the rest drawn by `rng`."""
        size = int(rng.integers(self.font_sizes[0], self.font_sizes[1] + 1))
        paper = int(rng.integers(0, 256))
        ink_choices = [v for v in range(256) if abs(v - paper) >= self.min_contrast]
        ink = int(ink_choices[int(rng.integers(len(ink_choices)))])
        return render_line(
            line, font_path, size, self.image_height, self.image_width,
            x=int(rng.integers(0, 25)), y_jitter=int(rng.integers(-3, 4)), paper=paper,
            ink=ink, noise_std=float(rng.uniform(0.0, self.max_noise_std)), rng=rng)

    def generate_examples(self, data_dir: str, tmp_dir: str, split: str, *,
                          mirror: str | None = None) -> Iterator[dict[str, Any]]:
        lines, fonts = self.lines(split), self.fonts(split)
        if not lines:
            raise problem.DataMissingError(
                f"{self.name}: no {split} lines found in the docstrings under "
                f"{self.stdlib or 'the standard library'}.")
        encoder = self.build_encoders(data_dir)["targets"]
        rng = np.random.default_rng({"train": 0, "dev": 1, "test": 2}[split])
        order = rng.permutation(len(lines))
        for index in range(self.num_examples(split)):
            line = lines[int(order[index % len(lines)])]
            image = self.render(line, fonts[int(rng.integers(len(fonts)))], rng)
            example = image_problems.image_example(image)
            example["image/class/label"] = encoder.encode(line) + [text_encoder.EOS_ID]
            yield example

    def example_reading_spec(self) -> dict[str, Any]:
        spec = super().example_reading_spec()
        spec["image/format"] = tf.io.FixedLenFeature((), tf.string, default_value="png")
        return spec

    def decode_image(self, encoded: Any) -> Any:
        return image_problems.ImageProblem.decode_image(self, encoded)

    def preprocess_example(self, example: dict[str, Any], mode: str,
                           model_hparams: Any) -> dict[str, Any]:
        """Decodes the PNG (no crop, no augmentation: the data is varied as rendered)."""
        example = dict(example)
        key, image = self.image_feature(example)
        example[key] = image
        return example

    def eval_metrics(self) -> list[str]:
        return ["accuracy", "accuracy_per_sequence", "neg_log_perplexity", "cer"]


@registry.register_problem("ocr_rendered_text_test")
class OcrRenderedTextTest(OcrRenderedText):
    """A small ocr_rendered_text for tests: 64 train strips, 8 dev and test."""

    num_train_examples = 64
    num_eval_examples = 8
    train_shards = 1
