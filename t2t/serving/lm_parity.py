"""The export parity gate for language models (t2t.serving.parity calls it).

Prompts are the first halves of dev examples (and an empty prompt); texts to score are
whole dev examples. In a fresh process (TensorFlow only) the SavedModel continues the
prompts through serving_default (the export's settings), through `generate` greedily
and sampling with a fixed seed, scores the texts through `score`, and continues the
prompt ids through serve_tf_example. t2t's Decoder and Scorer do the same from the same
checkpoint: texts must be equal, scores within parity_core.SCORE_TOLERANCE.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from t2t.config import DecodeHParams
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.decoding import decoder as decoder_lib
from t2t.decoding import scoring
from t2t.serving import parity_core
from t2t.serving.lm_serving import GENERATE_SIGNATURE, SCORE_SIGNATURE
from t2t.serving.serving_module import EXAMPLES_SIGNATURE, TEXT_SIGNATURE

# The sampled generate call of the gate: a fixed seed makes it comparable.
SAMPLED = {"temperature": 0.8, "top_k": 20, "top_p": 0.95, "seed": 1234}


def dev_token_ids(problem: problem_lib.Problem, data_dir: str | None, count: int) -> list[list[int]]:
    """The stored ids (EOS stripped) of the first `count` dev examples."""
    import tensorflow as tf

    files = problem.data_files(data_dir, problem_lib.DEV_SPLIT)
    found = []
    for record in tf.data.TFRecordDataset(files).take(count):
        feature = tf.train.Example.FromString(record.numpy()).features.feature["targets"]
        found.append(text_encoder.strip_extraneous(list(feature.int64_list.value)))
    return found


def _text(encoder: Any, ids: list[int]) -> str:
    return encoder.decode(ids) if encoder is not None else " ".join(map(str, ids))


def _results(out: dict[str, Any], row: int) -> tuple[str, float, list | None]:
    """(text, score, samples or beams) of one row of a served batch."""
    for key in ("samples", "beams"):
        if key in out:
            every = list(zip(out[key][row], out[key.rstrip("s") + "_scores"][row], strict=True))
            return out["outputs"][row], out["scores"][row], every
    return out["outputs"][row], out["scores"][row], None


def _compare_decodes(comparison: parity_core.Comparison, decoder: decoder_lib.Decoder, kind: str,
                     batches: list[list[bytes]], served: list[dict[str, Any]]) -> None:
    for batch, out in zip(batches, served, strict=True):
        texts = [v.decode("utf-8") for v in batch]
        with parity_core.quiet("absl"):
            wants = decoder.decode_texts(texts)
        for row, want in enumerate(wants):
            text, score, every = _results(out, row)
            comparison.add(kind, repr(texts[row]), want, text, score, every)


def _compare_scores(comparison: parity_core.Comparison, scorer: scoring.Scorer,
                    batches: list[list[bytes]], served: list[dict[str, Any]]) -> None:
    for batch, out in zip(batches, served, strict=True):
        texts = [v.decode("utf-8") for v in batch]
        with parity_core.quiet("absl"):
            wants = scorer.score_texts(texts)
        for row, want in enumerate(wants):
            comparison.compared += 1
            got = out["log_probs"][row]
            close = parity_core.scores_close(got, want.log_prob)
            if not close or out["tokens"][row] != want.tokens:
                comparison.differences.append(
                    f"[{SCORE_SIGNATURE}] text {texts[row][:60]!r}: log-probability {got:.5f} "
                    f"({out['tokens'][row]} tokens) != t2t {want.log_prob:.5f} ({want.tokens})")


def _compare_examples(comparison: parity_core.Comparison, decoder: decoder_lib.Decoder,
                      batches: list[list[dict[str, Any]]], served: list[dict[str, Any]]) -> None:
    for batch, out in zip(batches, served, strict=True):
        prompts = [np.asarray(e["targets"][-decoder.max_input_length:], np.int32) for e in batch]
        for row, want in enumerate(decoder.decode_features(prompts)):
            comparison.add(EXAMPLES_SIGNATURE, str(batch[row]["targets"]), want,
                           decoder.target_text(out["outputs"][row]), out["scores"][row], None)


def check_lm_parity(export_path: str, problem: problem_lib.Problem, model: Any,
                    data_dir: str | None, decode_hparams: DecodeHParams, num_examples: int,
                    info: dict[str, Any]) -> dict[str, Any]:
    """ParityError unless the language model's export decodes and scores as t2t does;
    returns the report of t2t.serving.parity.check_parity (+ "generate": the settings compared)."""
    encoder = problem.feature_encoders(data_dir).get("targets")
    examples = dev_token_ids(problem, data_dir, num_examples)
    prompt_ids = [ids[: max(1, len(ids) // 2)] for ids in examples]
    prompts = [_text(encoder, ids).encode("utf-8") for ids in prompt_ids] + [b""]
    batch_size = max(1, min(decode_hparams.batch_size, 4))
    dhp = dataclasses.replace(decode_hparams, batch_size=batch_size)
    decoder = decoder_lib.Decoder(problem, model, data_dir, dhp)  # the export's settings
    new_tokens = decoder.settings.new_tokens(0)
    calls = [{"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0}, SAMPLED]
    calls = [{**c, "max_new_tokens": new_tokens} for c in calls]
    text_batches = parity_core.chunks(prompts, batch_size) if info["text_signature"] else []
    score_batches = (parity_core.chunks([_text(encoder, ids).encode("utf-8") for ids in examples],
                                    batch_size) if info["text_signature"] else [])
    example_batches = parity_core.chunks([{"targets": ids} for ids in prompt_ids], batch_size)
    served = parity_core.serve_in_fresh_process(
        export_path, info, text_batches, example_batches,
        generate_calls=[{"settings": c, "batches": parity_core.encode_batches(text_batches)}
                        for c in calls] if info["text_signature"] else [],
        score_batches=parity_core.encode_batches(score_batches))
    settings = decoder.settings
    comparison = parity_core.Comparison(sampling=settings.sampling and settings.seed < 0)
    if info["text_signature"]:
        _compare_decodes(comparison, decoder, TEXT_SIGNATURE, text_batches, served["text"])
        for call, out in zip(calls, served["generate"], strict=True):
            call_dhp = dataclasses.replace(
                dhp, beam_size=1, temperature=call["temperature"], top_k=call["top_k"],
                top_p=call["top_p"], seed=call["seed"], max_new_tokens=new_tokens,
                # given: the model's sampling_method must not replace these call settings
                given_keys=(*dhp.given_keys, "beam_size", "temperature", "top_k", "top_p"))
            call_comparison = parity_core.Comparison(sampling=False,
                                                     differences=comparison.differences)
            _compare_decodes(call_comparison, decoder_lib.Decoder(problem, model, data_dir, call_dhp),
                             GENERATE_SIGNATURE, text_batches, out)
            comparison.compared += call_comparison.compared
        _compare_scores(comparison, scoring.Scorer(problem, model, data_dir, batch_size=batch_size),
                        score_batches, served["score"])
    plain = dataclasses.replace(dhp, return_prompt=False)
    _compare_examples(comparison, decoder_lib.Decoder(problem, model, data_dir, plain),
                      example_batches, served["examples"])
    parity_core.raise_differences(comparison, export_path)
    return {"examples": comparison.compared, "sampling": comparison.sampling,
            "samples": comparison.samples, "generate": calls}
