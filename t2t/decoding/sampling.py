"""Choosing the next token from logits: greedy, temperature, top-k and nucleus (top-p).

Seeded sampling is stateless and per row: row r at decoding step i draws from the
Gumbel noise of key fold_in(row_keys[r], i), so a row's sample depends only on its
key and the logits, never on the other rows of its batch or on how many batches came
before. `row_keys` (see `row_keys`) mix the user's seed, a hash of the row's content
(its prompt or inputs, padding-invariant) and its sample number: the same prompt, seed
and sample number give the same text in t2t-decoder and in an exported SavedModel.
"""

from __future__ import annotations

import tensorflow as tf

NEG_INF = -1e9
_HASH_MODULUS = 2_147_483_647  # 2^31 - 1


def filter_logits(logits: tf.Tensor, top_k: int | tf.Tensor = 0, top_p: float | tf.Tensor = 1.0
                  ) -> tf.Tensor:
    """logits [B, V] with everything outside the top_k / top-p nucleus set to -1e9.

    top_k 0 and top_p 1.0 keep everything; either may be a scalar tensor (an export's
    optional input)."""
    neg_inf = tf.constant(NEG_INF, logits.dtype)
    if isinstance(top_k, tf.Tensor) or (top_k and top_k > 0):
        vocab = tf.shape(logits)[-1]
        k = tf.where(top_k > 0, tf.minimum(tf.cast(top_k, tf.int32), vocab), vocab)
        sorted_logits = tf.sort(logits, direction="DESCENDING", axis=-1)
        kth = tf.gather(sorted_logits, k - 1, axis=-1)[:, None]
        logits = tf.where(logits < kth, neg_inf, logits)
    if isinstance(top_p, tf.Tensor) or top_p < 1.0:
        sorted_logits = tf.sort(logits, direction="DESCENDING", axis=-1)
        probs = tf.nn.softmax(sorted_logits, axis=-1)
        cumulative = tf.cumsum(probs, axis=-1, exclusive=True)
        # Keep the smallest prefix whose probability reaches top_p (at least one token).
        keep = cumulative < tf.cast(top_p, probs.dtype)
        threshold = tf.reduce_min(tf.where(keep, sorted_logits, sorted_logits[:, :1]), axis=-1, keepdims=True)
        # top_p 1 keeps everything (a float32 cumulative sum may reach 1 before the tail)
        logits = tf.where((logits < threshold) & (top_p < 1.0), neg_inf, logits)
    return logits


def content_hash(ids: tf.Tensor) -> tf.Tensor:
    """int64 [N] hash of each row of int ids [N, T] that ignores trailing padding (0)."""
    ids = tf.cast(tf.reshape(ids, [tf.shape(ids)[0], -1]), tf.int64)
    positions = tf.range(1, tf.shape(ids)[1] + 1, dtype=tf.int64)
    multipliers = (positions * 1_000_003) % _HASH_MODULUS + 1
    return tf.reduce_sum((ids % _HASH_MODULUS) * multipliers % _HASH_MODULUS, axis=1) % _HASH_MODULUS


def resolve_seed(seed: int | tf.Tensor | None) -> tf.Tensor:
    """The seed as an int64 scalar; None or a negative seed draws one at random."""
    if seed is None:
        seed = -1
    seed = tf.cast(seed, tf.int64)
    drawn = tf.random.uniform([], 0, _HASH_MODULUS, dtype=tf.int64)
    return tf.where(seed < 0, drawn, seed)


def row_keys(seed: tf.Tensor, content: tf.Tensor | None, sample_index: tf.Tensor) -> tf.Tensor:
    """int64 [N, 2] stateless keys: (seed, hash of content [N, T] and sample number [N])."""
    sample_index = tf.cast(sample_index, tf.int64)
    mixed = sample_index * 7_919
    if content is not None:
        mixed += content_hash(content)
    return tf.stack([tf.fill(tf.shape(sample_index), tf.cast(seed, tf.int64)), mixed], axis=1)


def _gumbel_noise(keys: tf.Tensor, step: tf.Tensor, vocab_size: tf.Tensor) -> tf.Tensor:
    """float32 [N, V] Gumbel(0, 1) noise, row r from fold_in(keys[r], step)."""
    step = tf.cast(step, tf.int64)

    def one_row(key: tf.Tensor) -> tf.Tensor:
        row_seed = tf.random.experimental.stateless_fold_in(key, step)
        return tf.random.stateless_uniform([vocab_size], row_seed, minval=1e-20, maxval=1.0)

    uniform = tf.map_fn(one_row, keys, fn_output_signature=tf.TensorSpec([None], tf.float32))
    return -tf.math.log(-tf.math.log(uniform))


def sample(
    logits: tf.Tensor,
    temperature: float | tf.Tensor = 0.0,
    top_k: int | tf.Tensor = 0,
    top_p: float | tf.Tensor = 1.0,
    seed: int | None = None,
    keys: tf.Tensor | None = None,
    step: int | tf.Tensor = 0,
) -> tf.Tensor:
    """int32 ids [B] from logits [B, V]: argmax when temperature is 0, else a sample.

    With `keys` (int64 [B, 2], see `row_keys`) the draw is stateless, row by row, at
    `step`; a bare int `seed` stands for keys (seed, row number). Neither: TensorFlow's
    stateful generator. `temperature` may be a scalar tensor (0 is still greedy).
    """
    logits = tf.cast(logits, tf.float32)
    greedy = tf.argmax(logits, axis=-1, output_type=tf.int32)
    if not isinstance(temperature, tf.Tensor) and not temperature:
        return greedy
    safe_temperature = tf.maximum(tf.cast(temperature, tf.float32), 1e-6)
    filtered = filter_logits(logits / safe_temperature, top_k, top_p)
    if keys is None and seed is not None:
        keys = row_keys(tf.constant(seed, tf.int64), None, tf.range(tf.shape(logits)[0]))
    if keys is None:
        drawn = tf.squeeze(tf.random.categorical(filtered, 1, dtype=tf.int32), axis=-1)
    else:
        noise = _gumbel_noise(keys, tf.convert_to_tensor(step), tf.shape(logits)[-1])
        drawn = tf.argmax(filtered + noise, axis=-1, output_type=tf.int32)
    if isinstance(temperature, tf.Tensor):
        return tf.where(temperature > 0, drawn, greedy)
    return drawn
