"""MS-COCO 2014 captions: image -> caption, and the Image2TextProblem base class.

Tensor2Tensor's `image_ms_coco_characters` (ImageMsCocoCharacters): one example per
(image, caption) pair; inputs = the image, targets = the caption as UTF-8 bytes
(T2T's "character level": ByteTextEncoder, ids = byte + 2, vocab 258) ending with EOS.
Train = the 414k captions of the 83k train2014 images (100 shards), dev = the captions
of the 40.5k val2014 images (10 shards), as in T2T.

Files (fetched into tmp_dir/mscoco, or from a mirror: URL prefix or local folder),
verified against the sizes and sha256 TensorFlow Datasets pins (url_checksums/
coco2014.txt), read straight from the zips (nothing is extracted):
  train2014.zip  -> train2014/COCO_train2014_<12 digits>.jpg
  val2014.zip    -> val2014/COCO_val2014_<12 digits>.jpg
  annotations_trainval2014.zip -> annotations/captions_{train,val}2014.json
    ({"images": [{"id", "file_name", ...}], "annotations": [{"image_id", "caption"}]})

Stored images: each image is resized once so that its shorter side is 256 pixels
(bicubic), center-cropped to 256x256 and re-encoded as JPEG (quality 90), then written
once per caption (about 5 times). T2T stored the original JPEG once per caption and
resized to 299x299 on every read. Reading: TRAIN takes a random 224x224 crop, EVAL the
central 224x224 crop. There is no horizontal flip: captions say "left" and "right".
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from t2t import registry
from t2t.data import problem
from t2t.data.bases import image_problems
from t2t.data.encoders import text_encoder
from t2t.data.generation import download
from t2t.problems.image import imagenet
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

TRAIN_IMAGES = "train2014.zip"
VAL_IMAGES = "val2014.zip"
ANNOTATIONS = "annotations_trainval2014.zip"
_COCO_URL = "http://images.cocodataset.org/"

# (url, size in bytes, sha256) as in TensorFlow Datasets' url_checksums/coco2014.txt.
MSCOCO_RESOURCES = {
    name: download.Resource(url, sha256=sha, size=size, filename=name)
    for name, url, size, sha in (
        (
            TRAIN_IMAGES,
            _COCO_URL + "zips/train2014.zip",
            13_510_573_713,
            "ede4087e640bddba550e090eae701092534b554b42b05ac33f0300b984b31775",
        ),
        (
            VAL_IMAGES,
            _COCO_URL + "zips/val2014.zip",
            6_645_013_297,
            "fe9be816052049c34717e077d9e34aa60814a55679f804cd043e3cbee3b9fde0",
        ),
        (
            ANNOTATIONS,
            _COCO_URL + "annotations/annotations_trainval2014.zip",
            252_872_794,
            "031296bbc80c45a1d1f76bf9a90ead27e94e99ec629208449507a4917a3bf009",
        ),
    )
}


def _same_kind(e: download.DownloadError) -> type[download.DownloadError]:
    """ChecksumError or DownloadError, as `e` (whose own type may be gin's proxy)."""
    return download.ChecksumError if isinstance(e, download.ChecksumError) else download.DownloadError


class CocoFormatError(ValueError):
    """A COCO file does not have the layout of the official files."""


class Image2TextProblem(image_problems.ImageProblem):
    """Image -> text: inputs a uint8 image, targets token ids ending with EOS.

    Stored features: "image/encoded" (JPEG, image_size x image_size), "image/format",
    "image/height", "image/width" and, as in T2T, the target ids in "image/class/label".
    Subclasses implement `generate_image_captions` yielding (encoded image bytes in any
    format PIL reads, [captions]); each image is resized once and written once per
    caption. `crop_size` is the size the model sees. The vocabulary is byte-level (T2T's
    `is_character_level`); override `build_encoders` for another.
    """

    image_size = 256  # stored
    crop_size = 224  # seen by the model
    num_channels = 3
    train_shards = 100
    dev_shards = 10
    batch_size_means_tokens = False
    sequence_features: Sequence[str] = ("targets",)
    target_space_id = problem.SpaceID.EN_CHR

    @property
    def model_image_shape(self) -> list[int]:
        """[H, W, C] of the images the model sees (after cropping)."""
        return [self.crop_size, self.crop_size, self.num_channels]

    def generate_image_captions(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[tuple[bytes, Sequence[str]]]:
        raise NotImplementedError(f"{type(self).__name__} must implement generate_image_captions().")

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        return {"targets": text_encoder.ByteTextEncoder()}

    def generate_examples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, Any]]:
        encoder = self.build_encoders(data_dir)["targets"]
        images = self.generate_image_captions(data_dir, tmp_dir, split, mirror=mirror)
        for index, (data, captions) in enumerate(images):
            try:
                encoded, height, width = imagenet.resize_image(data, self.image_size, square=True)
            except (OSError, ValueError, SyntaxError) as e:
                raise ValueError(
                    f"{self.name} {split} image {index} ({captions[:1]}): cannot decode it ({e})."
                ) from e
            for caption in captions:
                example = imagenet.jpeg_example(encoded, height, width, None)
                example["image/class/label"] = encoder.encode(caption) + [text_encoder.EOS_ID]
                yield example

    def example_reading_spec(self) -> dict[str, Any]:
        spec = super().example_reading_spec()
        spec["image/format"] = tf.io.FixedLenFeature((), tf.string, default_value="jpeg")
        spec["image/class/label"] = tf.io.RaggedFeature(tf.int64)
        return spec

    def decode_examples(self, serialized: Any) -> dict[str, Any]:
        """A batch: {"inputs": string [B] (JPEG), "targets": int32 ragged [B, None]}."""
        parsed = tf.io.parse_example(serialized, self.example_reading_spec())
        return {
            "inputs": parsed["image/encoded"],
            "targets": tf.cast(parsed["image/class/label"], tf.int32),
        }

    def decode_image(self, encoded: Any) -> Any:
        image = tf.io.decode_jpeg(encoded, channels=self.num_channels)
        return tf.ensure_shape(image, [self.image_size, self.image_size, self.num_channels])

    def preprocess_example(
        self, example: dict[str, Any], mode: str, model_hparams: Any
    ) -> dict[str, Any]:
        """Decodes the JPEG; TRAIN: random crop_size crop; else the central crop."""
        example = dict(example)
        key, image = self.image_feature(example)
        shape = [self.crop_size, self.crop_size, self.num_channels]
        if mode == problem.TRAIN:
            image = tf.image.random_crop(image, shape)
        else:
            image = tf.image.resize_with_crop_or_pad(image, self.crop_size, self.crop_size)
        example[key] = tf.ensure_shape(image, shape)
        return example

    def problem_hparams(self, data_dir: str | None) -> problem.ProblemHParams:
        return problem.ProblemHParams(
            modality={"inputs": problem.Modality.IMAGE, "targets": problem.Modality.SYMBOL},
            vocab_size={
                "inputs": 256,
                "targets": self.feature_encoders(data_dir)["targets"].vocab_size,
            },
            input_space_id=problem.SpaceID.IMAGE,
            target_space_id=self.target_space_id,
            batch_size_means_tokens=False,
            stop_at_eos=True,
            image_shape=self.model_image_shape,
        )

    def eval_metrics(self) -> list[str]:
        return ["accuracy", "accuracy_per_sequence", "neg_log_perplexity"]


def read_captions(annotations_zip: str, member: str) -> list[tuple[str, list[str]]]:
    """[(image file name, [captions])] of one captions_*.json, in the file's image
    order (images without captions left out), captions in annotation id order."""
    try:
        with zipfile.ZipFile(annotations_zip) as zf, zf.open(member) as f:
            data = json.load(f)
    except KeyError:
        raise CocoFormatError(f"{annotations_zip} has no member {member!r}.") from None
    except (zipfile.BadZipFile, ValueError) as e:
        raise CocoFormatError(f"{annotations_zip}:{member}: {e}") from e
    try:
        captions: dict[int, list[str]] = {int(image["id"]): [] for image in data["images"]}
        for annotation in sorted(data["annotations"], key=lambda a: int(a.get("id", 0))):
            captions[int(annotation["image_id"])].append(str(annotation["caption"]).strip())
        return [
            (str(image["file_name"]), captions[int(image["id"])])
            for image in data["images"]
            if captions[int(image["id"])]
        ]
    except (KeyError, TypeError) as e:
        raise CocoFormatError(
            f"{annotations_zip}:{member} is not a COCO captions file ({type(e).__name__}: {e})."
        ) from e


@registry.register_problem
class ImageMsCocoCharacters(Image2TextProblem):
    """MS-COCO 2014 captioning, byte-level captions; 256x256 stored, 224x224 crops."""

    homepage = "https://cocodataset.org/"
    resources: Mapping[str, download.Resource] = MSCOCO_RESOURCES
    download_subdir = "mscoco"
    # split -> (images zip, folder inside it, captions json inside the annotations zip)
    split_files = {
        problem.TRAIN_SPLIT: (TRAIN_IMAGES, "train2014", "annotations/captions_train2014.json"),
        problem.DEV_SPLIT: (VAL_IMAGES, "val2014", "annotations/captions_val2014.json"),
    }

    def __init__(self, was_reversed: bool = False):
        super().__init__(was_reversed)
        self._paths: dict[str, str] = {}
        self._captions: dict[str, list[tuple[str, list[str]]]] = {}

    def fetch(self, names: Sequence[str], tmp_dir: str, mirror: str | None) -> list[str]:
        """Verified local paths (verified once per instance: the zips are ~20 GB)."""
        directory = os.path.abspath(os.path.join(tmp_dir, self.download_subdir))
        paths = []
        for name in names:
            key = os.path.join(directory, name)
            if key not in self._paths:
                try:
                    self._paths[key] = download.fetch(self.resources[name], directory, mirror)
                except download.DownloadError as e:
                    wanted = ", ".join(sorted(self.resources))
                    raise _same_kind(e)(
                        f"{self.name}: could not get {name}.\n{e}\nTo provide the data by "
                        f"hand, place the files {wanted} (from {self.homepage}) in "
                        f"{directory} (under --tmp_dir), or pass --data_mirror (or set "
                        f"{download.MIRROR_ENV_VAR}) to a folder or URL prefix holding them."
                    ) from e
            paths.append(self._paths[key])
        return paths

    def captions(self, split: str, tmp_dir: str, mirror: str | None) -> list[tuple[str, list[str]]]:
        if split not in self.split_files:
            raise ValueError(f"{self.name} has no split {split!r}.")
        if split not in self._captions:
            (annotations,) = self.fetch([ANNOTATIONS], tmp_dir, mirror)
            self._captions[split] = read_captions(annotations, self.split_files[split][2])
        return self._captions[split]

    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        """Fetches all three zips and reads both caption files before any shard."""
        self.fetch(sorted(self.resources), tmp_dir, mirror)
        for split in self.split_files:
            self.captions(split, tmp_dir, mirror)

    def num_examples(self, split: str) -> int | None:
        """Known once prepare() has read the captions (one example per caption)."""
        if split not in self._captions:
            return None
        return sum(len(c) for _, c in self._captions[split])

    def generate_image_captions(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[tuple[bytes, Sequence[str]]]:
        images_zip, folder, _ = self.split_files[split]
        entries = self.captions(split, tmp_dir, mirror)
        (path,) = self.fetch([images_zip], tmp_dir, mirror)
        with zipfile.ZipFile(path) as zf:
            for file_name, captions in entries:
                member = f"{folder}/{file_name}"
                try:
                    data = zf.read(member)
                except KeyError:
                    raise CocoFormatError(
                        f"{path} has no image {member!r}, named in the {split} captions."
                    ) from None
                yield data, captions


@registry.register_problem
class ImageMsCocoTokens32k(ImageMsCocoCharacters):
    """MS-COCO 2014 captioning, captions in <= 32768 SentencePiece pieces; 224x224 crops.

    The SentencePiece (unigram) model is trained on the train2014 captions; ids 0 PAD,
    1 EOS, 2 UNK.

    Tensor2Tensor's `image_ms_coco_tokens32k` borrowed the 32k subword vocabulary of its
    English-German/French translation data; t2t trains one on the captions themselves
    (written to data_dir as vocab.image_ms_coco_tokens32k.32768.model by t2t-datagen),
    so the problem needs no other data set.
    """

    approx_vocab_size = 2**15
    target_space_id = problem.SpaceID.EN_TOK

    @property
    def vocab_filename(self) -> str:
        return f"vocab.{self.dataset_filename()}.{self.approx_vocab_size}.model"

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        if data_dir is None:
            raise problem.DataMissingError(
                f"{self.name} needs its SentencePiece vocabulary from data_dir; pass data_dir.")
        hint = f"run `t2t-datagen --problem={self.name} --data_dir={data_dir}` first"
        path = os.path.join(data_dir, self.vocab_filename)
        return {"targets": text_encoder.SentencePieceEncoder.load(path, hint=hint)}

    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        """Fetches and reads the data, then trains the vocabulary on the train captions
        (unless data_dir already has it: a vocabulary is never overwritten)."""
        super().prepare(data_dir, tmp_dir, mirror=mirror)
        path = os.path.join(data_dir, self.vocab_filename)
        if os.path.exists(path):
            return
        os.makedirs(data_dir, exist_ok=True)
        texts = (c for _, captions in self.captions(problem.TRAIN_SPLIT, tmp_dir, mirror)
                 for c in captions)
        text_encoder.SentencePieceEncoder.train(texts, path[: -len(".model")],
                                                self.approx_vocab_size)
