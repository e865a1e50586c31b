"""Decoding a model in-graph, batched: greedy, sampling or beam search over its step
function (t2t.models.step_interface).

    from t2t.decoding import infer
    result = infer.infer(model, {"inputs": ids}, decode_length=20, beam_size=4, alpha=0.6)
    result["outputs"]  # int32 [B, L], 0 after EOS;  result["scores"]  float32 [B]
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t.decoding import beam_search, greedy
from t2t.features import EOS_ID
from t2t.models import step_interface


def _classify(model: Any, features: dict[str, tf.Tensor], top_beams: int) -> dict[str, tf.Tensor]:
    """The argmax class [B, 1] (or the top_beams classes [B, K, 1]) and log-probability."""
    logits, _ = model(features, training=False)
    log_probs = tf.nn.log_softmax(tf.cast(logits[:, 0, :], tf.float32))
    if top_beams > 1:
        values, ids = tf.math.top_k(log_probs, k=top_beams)
        return {"outputs": ids[:, :, None], "scores": values}
    outputs = tf.argmax(log_probs, axis=-1, output_type=tf.int32)[:, None]
    return {"outputs": outputs, "scores": tf.reduce_max(log_probs, axis=-1)}


def infer(
    model: step_interface.Decodable,
    features: dict[str, tf.Tensor],
    decode_length: int | tf.Tensor = 50,
    beam_size: int = 1,
    top_beams: int = 1,
    alpha: float = 0.0,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | None = None,
    use_cache: bool = True,
) -> dict[str, tf.Tensor]:
    """Decodes targets for `features` (inputs only), in-graph and batched.

    Returns {"outputs": int32 [B, decode_length] (0-padded after EOS), "scores":
    float32 [B]}; with top_beams > 1, [B, top_beams, L] and [B, top_beams], best
    first. beam_size > 1 runs beam search with length penalty ((5+len)/6)^alpha
    (scores are penalized log-probabilities); otherwise temperature 0 is greedy and
    above 0 samples (restricted to top_k / nucleus top_p), scores being the
    log-probability of the output. Class-label problems return the argmax class
    [B, 1]. `use_cache=False` forces the step that re-runs the whole model on the
    prefix (for models with a cache, to check it).
    """
    features = {k: v for k, v in features.items() if k != "targets"}
    if model.problem_hparams.is_classifier:
        return _classify(model, features, top_beams)
    if beam_size < 1 or top_beams < 1 or top_beams > max(beam_size, 1):
        raise ValueError(
            f"Need 1 <= top_beams <= beam_size, got beam_size={beam_size}, top_beams={top_beams}."
        )
    reference = features.get("inputs")
    batch_size = tf.shape(reference)[0] if reference is not None else tf.constant(1)
    length = tf.cast(decode_length, tf.int32)
    cached = use_cache and model.has_decode_cache
    init = model.decode_init_cached if cached else model.decode_init
    step = model.decode_step_cached if cached else model.decode_step
    if beam_size > 1:
        state = tf.nest.map_structure(
            lambda t: beam_search.tile_beams(t, beam_size), init(features, length)
        )
        ids, scores = beam_search.beam_search(
            step, state, batch_size, beam_size, length,
            model.problem_hparams.vocab_size["targets"], alpha=alpha, eos_id=EOS_ID,
            top_beams=top_beams,
        )
        if top_beams == 1:
            ids, scores = ids[:, 0], scores[:, 0]
        return {"outputs": ids, "scores": scores}
    ids, scores = greedy.greedy_or_sample(
        step, init(features, length), batch_size, length, temperature, top_k, top_p,
        eos_id=EOS_ID, seed=seed,
    )
    return {"outputs": ids, "scores": scores}
