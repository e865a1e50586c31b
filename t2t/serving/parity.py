"""The export parity gate: a SavedModel must decode exactly as t2t's Decoder does.

A fresh Python process that imports only TensorFlow (and tensorflow_text for
SentencePiece) loads the export (t2t/serving/parity_worker.py, started by path) and
decodes dev examples through both signatures; t2t's Decoder decodes the same inputs
from the same checkpoint and settings. Texts must be equal and scores within 1e-3,
else ParityError lists the differing examples.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import wave
from collections.abc import Sequence
from typing import Any

import numpy as np

from t2t.config import DecodeHParams
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.decoding import decoder as decoder_lib
from t2t.decoding import image_inputs
from t2t.features import EOS_ID, PCM_OFFSET, Modality
from t2t.serving.parity_core import (  # SCORE_TOLERANCE, ParityError: also this gate's API
    SCORE_TOLERANCE,  # noqa: F401
    Comparison,
    ParityError,  # noqa: F401
    chunks,
    quiet,
    raise_differences,
    serve_in_fresh_process,
)
from t2t.serving.serving_module import EXAMPLES_SIGNATURE, TEXT_SIGNATURE

EXPORT_INFO_FILE = "t2t_export.json"  # in the export's assets.extra/


def dev_examples(problem: problem_lib.Problem, data_dir: str | None, count: int,
                 is_image: bool) -> list[dict[str, Any]]:
    """The first `count` dev examples: {"ids": stored input ids}, {"image": PNG bytes}
    or {"audio": PCM16 bytes}."""
    import tensorflow as tf

    try:
        files = problem.data_files(data_dir, problem_lib.DEV_SPLIT)
    except problem_lib.DataMissingError:
        if not hasattr(problem, "parity_texts"):  # a problem with no data has its own
            raise
        encoder = problem.feature_encoders(data_dir)["inputs"]
        return [{"ids": encoder.encode(text) + [text_encoder.EOS_ID]}
                for text in problem.parity_texts(data_dir, count)]
    examples = []
    for record in tf.data.TFRecordDataset(files).take(count):
        parsed = tf.train.Example.FromString(record.numpy()).features.feature
        if is_image:
            examples.append({"image": parsed["image/encoded"].bytes_list.value[0]})
        elif "audio/encoded" in parsed:
            examples.append({"audio": parsed["audio/encoded"].bytes_list.value[0]})
        else:
            key = "targets" if problem.was_reversed else "inputs"
            examples.append({"ids": list(parsed[key].int64_list.value)})
    return examples


def _raw_inputs(dev: list[dict[str, Any]], encoder: Any, is_image: bool,
                extra_texts: Sequence[str]) -> list[bytes]:
    """What a client sends the text signature: dev inputs as text (plus edge cases),
    or the encoded images."""
    if is_image:
        return [e["image"] for e in dev]
    texts = []
    for e in dev:
        stripped = text_encoder.strip_extraneous(e["ids"])
        texts.append(encoder.decode(stripped) if encoder is not None
                     else " ".join(map(str, stripped)))
    return [t.encode("utf-8") for t in [*texts, *extra_texts]]


def wav_bytes(pcm16: bytes, sample_rate: int) -> bytes:
    """A mono 16-bit WAV file of little-endian PCM16 bytes (what a speech client sends)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(sample_rate)
        f.writeframes(pcm16)
    return buffer.getvalue()


def _audio_ids(data: bytes) -> np.ndarray:
    """PCM ids [N] of a WAV file's bytes, or of stored PCM16 bytes."""
    if data[:4] == b"RIFF":
        with wave.open(io.BytesIO(data), "rb") as f:
            data = f.readframes(f.getnframes())
    return np.frombuffer(data, "<i2").astype(np.int32) + PCM_OFFSET


def _served_pixels(decoder: decoder_lib.Decoder, encoded: bytes) -> np.ndarray:
    """The pixels the export sees in encoded image bytes: the model's size and channels
    (a stored image larger than the model's, e.g. COCO's 256 for 224 crops, is resized,
    as a client's image would be), decoded as t2t-decoder decodes an image file."""
    return image_inputs.decode_image(encoded, decoder.problem_hparams.image_shape)[0]


def _compare_text(comparison: Comparison, decoder: decoder_lib.Decoder, problem: Any,
                  batches: list[list[bytes]], served: list[dict[str, Any]], kind: str) -> None:
    for batch_values, out in zip(batches, served, strict=True):
        if kind == Modality.IMAGE:
            wants = decoder.decode_features([_served_pixels(decoder, v) for v in batch_values])
            labels = ["<image>"] * len(batch_values)
        elif kind == Modality.AUDIO:
            wants = decoder.decode_features([_audio_ids(v) for v in batch_values])
            labels = [f"<{len(v)} bytes of WAV>" for v in batch_values]
        else:
            texts = [v.decode("utf-8") for v in batch_values]
            with quiet("absl"):  # "line N is empty" for the edge-case lines
                wants = decoder.decode_texts(texts)
            labels = [repr(t) for t in texts]
        for row, want in enumerate(wants):
            beams = (list(zip(out["beams"][row], out["beam_scores"][row], strict=True))
                     if decoder.settings.return_beams else None)
            comparison.add(TEXT_SIGNATURE, labels[row], want, out["outputs"][row],
                           out["scores"][row], beams)


def _compare_examples(comparison: Comparison, decoder: decoder_lib.Decoder, problem: Any,
                      batches: list[list[dict[str, Any]]], served: list[dict[str, Any]],
                      kind: str) -> None:
    for batch, out in zip(batches, served, strict=True):
        if kind == Modality.IMAGE:
            prepared = [_served_pixels(decoder, e["image"]) for e in batch]
            labels = ["<image>"] * len(batch)
        elif kind == Modality.AUDIO:
            prepared = [_audio_ids(e["audio"]) for e in batch]
            labels = [f"<{len(e['audio']) // 2} samples>" for e in batch]
        else:
            prepared = [np.asarray([*text_encoder.strip_extraneous(e["ids"])[
                :decoder.max_input_length], EOS_ID], np.int32) for e in batch]
            labels = [str(e["ids"]) for e in batch]
        for row, want in enumerate(decoder.decode_features(prepared)):
            beams = None
            if decoder.settings.return_beams:
                beams = [(decoder.target_text(ids), score) for ids, score in
                         zip(out["beams"][row], out["beam_scores"][row], strict=True)]
            comparison.add(EXAMPLES_SIGNATURE, labels[row], want,
                           decoder.target_text(out["outputs"][row]), out["scores"][row], beams)


def check_parity(
    export_path: str,
    problem: problem_lib.Problem,
    model: Any,
    data_dir: str | None,
    decode_hparams: DecodeHParams,
    num_examples: int = 6,
    extra_texts: Sequence[str] = ("",),
    info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Decodes dev examples with the SavedModel in a fresh process (TensorFlow only) and
    with t2t's Decoder; ParityError naming the differences unless they agree.

    Returns a report {"examples": decodes compared, "sampling": whether outputs were
    only checked to run (temperature > 0 samples), "samples": a few (input, output) pairs
    of the text signature}."""
    if info is None:
        with open(os.path.join(export_path, "assets.extra", EXPORT_INFO_FILE),
                  encoding="utf-8") as f:
            info = json.load(f)
    if model.problem_hparams.is_language_model:
        from t2t.serving import lm_parity

        return lm_parity.check_lm_parity(export_path, problem, model, data_dir, decode_hparams,
                                         num_examples, info)
    kind = model.problem_hparams.modality.get("inputs")
    is_image = kind == Modality.IMAGE
    dev = dev_examples(problem, data_dir, num_examples, is_image)
    batch_size = max(1, min(decode_hparams.batch_size, 4))
    decoder = decoder_lib.Decoder(problem, model, data_dir,
                                  dataclasses.replace(decode_hparams, batch_size=batch_size))
    # The same inputs for both sides, in batches of the same composition.
    if kind == Modality.AUDIO:  # WAV files, as a client sends them
        raw = [wav_bytes(e["audio"], model.problem_hparams.audio_sample_rate) for e in dev]
    else:
        raw = _raw_inputs(dev, problem.feature_encoders(data_dir).get("inputs"), is_image,
                          extra_texts)
    text_batches = chunks(raw, batch_size) if info["text_signature"] else []
    example_batches = chunks(dev, batch_size)
    served = serve_in_fresh_process(export_path, info, text_batches, example_batches)
    comparison = Comparison(sampling=decoder.settings.sampling and decoder.settings.seed < 0)
    if info["text_signature"]:
        _compare_text(comparison, decoder, problem, text_batches, served["text"], kind)
    _compare_examples(comparison, decoder, problem, example_batches, served["examples"], kind)
    raise_differences(comparison, export_path)
    return {"examples": comparison.compared, "sampling": comparison.sampling,
            "samples": comparison.samples}
