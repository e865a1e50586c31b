"""Decoding a model in-graph, batched: greedy, sampling or beam search over its step
function (t2t.models.step_interface).

    from t2t.decoding import infer
    result = infer.infer(model, {"inputs": ids}, decode_length=20, beam_size=4, alpha=0.6)
    result["outputs"]  # int32 [B, L], 0 after EOS;  result["scores"]  float32 [B]
    # A language model continues prompts (int32 [B, P], 0-padded), 3 samples each:
    infer.infer(lm, {"prompt": ids}, decode_length=100, temperature=0.8, top_p=0.95,
                num_samples=3, seed=1)["outputs"]  # [B, 3, 100]
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t.decoding import beam_search, greedy, prompting, sampling
from t2t.features import EOS_ID, Modality
from t2t.models import step_interface

PROMPT = "prompt"


def _classify(model: Any, features: dict[str, tf.Tensor], top_beams: int) -> dict[str, tf.Tensor]:
    """The argmax class [B, 1] (or the top_beams classes [B, K, 1]) and log-probability."""
    logits, _ = model(features, training=False)
    log_probs = tf.nn.log_softmax(tf.cast(logits[:, 0, :], tf.float32))
    if top_beams > 1:
        values, ids = tf.math.top_k(log_probs, k=top_beams)
        return {"outputs": ids[:, :, None], "scores": values}
    outputs = tf.argmax(log_probs, axis=-1, output_type=tf.int32)[:, None]
    return {"outputs": outputs, "scores": tf.reduce_max(log_probs, axis=-1)}


def _one_pass(model: Any, features: dict[str, tf.Tensor], top_beams: int) -> dict[str, tf.Tensor]:
    """Targets decided in one forward pass: a class label (`_classify`), or real-valued
    targets, whose outputs are the prediction, float32 [B, ..., D], with zero scores."""
    if model.problem_hparams.is_classifier:
        return _classify(model, features, top_beams)
    predictions, _ = model(features, training=False)
    predictions = tf.cast(predictions, tf.float32)
    return {"outputs": predictions, "scores": tf.zeros(tf.shape(predictions)[:1])}


def _check(beam_size: int, top_beams: int, num_samples: int) -> None:
    if beam_size < 1 or top_beams < 1 or top_beams > max(beam_size, 1):
        raise ValueError(
            f"Need 1 <= top_beams <= beam_size, got beam_size={beam_size}, top_beams={top_beams}."
        )
    if num_samples < 1 or (num_samples > 1 and beam_size > 1):
        raise ValueError(f"num_samples={num_samples}: need >= 1, and beam_size=1 above 1.")


def _tile(features: dict[str, tf.Tensor], copies: int) -> dict[str, tf.Tensor]:
    return {k: beam_search.tile_beams(v, copies) for k, v in features.items()} if copies > 1 else features


def _sample_keys(
    seed: int | tf.Tensor | None, reference: tf.Tensor | None, batch_size: tf.Tensor,
    num_samples: int, first_sample: int | tf.Tensor = 0,
) -> tf.Tensor:
    """Per-row sampling keys from the seed, the row's content and its sample number
    (first_sample, first_sample + 1, ... for the num_samples copies of a row)."""
    sample_index = tf.tile(tf.range(num_samples), [batch_size // num_samples])
    sample_index += tf.cast(first_sample, tf.int32)
    content = reference  # inputs, or the prompt
    if content is not None and (not content.dtype.is_integer or content.shape.rank != 2):
        content = None  # image inputs: the sample number and seed alone key a row
    return sampling.row_keys(sampling.resolve_seed(seed), content, sample_index)


def _row_budget(decode_length: int | tf.Tensor, rows: tf.Tensor, copies: int) -> tf.Tensor:
    """int32 [rows * copies]: each row's decode length (a scalar is every row's), tiled
    like the features (`copies` samples of a row are neighbours)."""
    budget = tf.broadcast_to(tf.cast(decode_length, tf.int32), [rows])
    return beam_search.tile_beams(budget, copies) if copies > 1 else budget


def _search(model: Any, features: dict[str, tf.Tensor], step: Any, length: tf.Tensor,
            batch_size: tf.Tensor, options: dict[str, Any]) -> tuple[tf.Tensor, tf.Tensor]:
    """Beam search (beam_size > 1) or greedy / sampling over `step`: (ids, scores)."""
    cached = options["cached"]
    init = model.decode_init_cached if cached else model.decode_init
    beam_size = options["beam_size"]
    if beam_size > 1:
        state = tf.nest.map_structure(
            lambda t: beam_search.tile_beams(t, beam_size), init(features, length))
        return beam_search.beam_search(
            step, state, batch_size, beam_size, length,
            model.problem_hparams.vocab_size["targets"], alpha=options["alpha"],
            eos_id=options["eos_id"], top_beams=options["top_beams"],
            rule=options["beam_search_rule"])
    return greedy.greedy_or_sample(
        step, init(features, length), batch_size, length, options["temperature"],
        options["top_k"], options["top_p"], eos_id=options["eos_id"], keys=options["keys"])


def _constrained_step(step: Any, row_prompt: tf.Tensor | None, row_budget: tf.Tensor | None,
                      new_tokens: tf.Tensor) -> Any:
    """`step` with each row's prompt (int32 [N, P], or None) forced first and at most
    new_tokens tokens after it; with row_budget (int32 [N]) exactly that many."""
    if row_budget is not None:  # EOS first at each row's end (after its prompt)
        start = 0 if row_prompt is None else prompting.prompt_lengths(row_prompt)
        step = prompting.exact_length_step(step, start + row_budget, EOS_ID)
    if row_prompt is not None:
        limit = new_tokens if row_budget is None else row_budget
        step = prompting.forced_step(step, row_prompt, limit, EOS_ID)
    return step


def _batch_sized(features: dict[str, tf.Tensor], prompt: tf.Tensor | None) -> dict[str, tf.Tensor]:
    """`features` with "targets" sizing the batch when there is a prompt (decode_init
    overwrites it), or, with nothing to condition on (unconditional image generation),
    one empty row whose num_samples copies are the samples."""
    if prompt is not None:
        features["targets"] = prompt
    if "inputs" not in features and "targets" not in features:
        features["targets"] = tf.zeros([1, 0], tf.int32)
    return features


def infer(
    model: step_interface.Decodable,
    features: dict[str, tf.Tensor],
    decode_length: int | tf.Tensor = 50,
    beam_size: int = 1,
    top_beams: int = 1,
    alpha: float = 0.0,
    temperature: float | tf.Tensor = 0.0,
    top_k: int | tf.Tensor = 0,
    top_p: float | tf.Tensor = 1.0,
    seed: int | tf.Tensor | None = None,
    use_cache: bool = True,
    num_samples: int = 1,
    force_decode_length: bool = False,
    first_sample: int | tf.Tensor = 0,
    beam_search_rule: str = "t2t",
) -> dict[str, tf.Tensor]:
    """Decodes targets for `features` ("inputs", and/or "prompt"), in-graph and batched.

    Returns {"outputs": int32 [B, decode_length] (0-padded after EOS), "scores":
    float32 [B]}; with top_beams > 1 (or num_samples > 1), [B, K, L] and [B, K], best
    first for beams. beam_size > 1 runs beam search with length penalty
    ((5+len)/6)^alpha (scores are penalized log-probabilities); otherwise temperature
    0 is greedy and above 0 samples (restricted to top_k / nucleus top_p; temperature,
    top_k, top_p and seed may be scalar tensors), scores being the log-probability of
    the output. `seed` >= 0 makes samples repeat exactly (stateless, per row: see
    t2t.decoding.sampling); None or < 0 draws a seed; a row's samples are numbered from
    `first_sample`. "prompt" int32 [B, P] (0-padded) is forced before decoding (a
    language model's prompt, or a seq2seq model's target prefix beside "inputs"):
    outputs are then the decode_length tokens after each row's prompt, and scores
    their log-probability. `force_decode_length`: every output has exactly
    decode_length tokens (EOS cannot come earlier; one forced EOS follows), and
    decode_length may be int32 [B], one length per row. Class-label problems return
    the argmax class [B, 1]. `use_cache=False` forces the step that re-runs the whole
    model on the prefix (to check a model's cache). `beam_search_rule` ("t2t" or
    "transformers"): which hypotheses beam search keeps finished (beam_search.RULES).
    """
    features = {k: tf.convert_to_tensor(v) for k, v in features.items() if k != "targets"}
    prompt = features.pop(PROMPT, None)
    if model.problem_hparams.is_classifier or model.problem_hparams.modality.get("targets") == Modality.REAL:
        return _one_pass(model, features, top_beams)
    _check(beam_size, top_beams, num_samples)
    prompt = None if prompt is None else tf.cast(prompt, tf.int32)
    features = _batch_sized(features, prompt)
    rows = tf.shape(features.get("inputs", features.get("targets")))[0]
    features = _tile(features, num_samples)
    reference = features.get("inputs", features.get("targets"))
    # Images are a fixed number of sub-pixels, every value (1 included) a colour: no EOS.
    eos_id = -1 if model.problem_hparams.modality.get("targets") == Modality.IMAGE else EOS_ID
    batch_size = tf.shape(reference)[0]
    force = force_decode_length and eos_id >= 0
    budget = _row_budget(decode_length, rows, num_samples) if force else None
    new_tokens = tf.reduce_max(budget) if force else tf.cast(decode_length, tf.int32)
    # One step more than the longest prompt needs: every row then ends with its forced
    # EOS, so a row's beams end alike whatever the other prompts of its batch.
    length = new_tokens + int(force) if prompt is None else tf.shape(prompt)[1] + new_tokens + 1
    cached = use_cache and model.has_decode_cache
    step = model.decode_step_cached if cached else model.decode_step

    def per_beam(t):  # [N] or [N, P] rows -> one per beam
        return beam_search.tile_beams(t, beam_size) if beam_size > 1 else t

    step = _constrained_step(step, None if prompt is None else per_beam(features["targets"]),
                             None if budget is None else per_beam(budget), new_tokens)
    ids, scores = _search(model, features, step, length, batch_size, {
        "cached": cached, "beam_size": beam_size, "alpha": alpha, "eos_id": eos_id,
        "beam_search_rule": beam_search_rule, "top_beams": top_beams,
        "temperature": temperature, "top_k": top_k, "top_p": top_p,
        "keys": None if beam_size > 1 else _sample_keys(seed, reference, batch_size,
                                                        num_samples, first_sample)})
    if num_samples > 1:
        ids = tf.reshape(ids, [-1, num_samples, length])
        scores = tf.reshape(scores, [-1, num_samples])
    if prompt is not None:
        ids = prompting.continuation(ids, prompting.prompt_lengths(prompt), new_tokens)
    if top_beams == 1 and beam_size > 1:
        ids, scores = ids[:, 0], scores[:, 0]
    return {"outputs": ids, "scores": scores}
