"""The Image Transformer (Parmar et al., 2018) as Tensor2Tensor's `imagetransformer`.

A decoder-only Transformer over an image's sub-pixels: an image [H, W, C] is the
sequence of its L = H*W*C values in raster order, channels interleaved, each a 256-way
symbol (t2t.layers.modalities.ImageTargetModality). The sequence is shifted right by one,
a 2-D timing signal of (row, sub-pixel column) is added, and `num_decoder_layers` layers
of masked local self-attention (t2t.layers.local_attention: "local_1d" blocks of
`block_length` sub-pixels, or "local_2d" rectangles of `query_shape`) and feed-forward
layers predict each sub-pixel from the ones before it.

Conditioning, from the problem's inputs (none with hparams.unconditional):
  a class label (`image_*_rev` problems): its embedding is added at every position, as
    in Tensor2Tensor;
  an image (super-resolution, `img2img_*`): upsampled to the target size (nearest
    neighbour), each of its sub-pixels embedded by (channel, value) and added at the
    same position, so each output sub-pixel sees the low-resolution pixel it refines;
  nothing (`image_*_gen`).
Sampling is cached: each new sub-pixel runs every layer once on one position and attends
over its block's cached keys and values, so its cost is the same at the first and the
last row.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from t2t import registry
from t2t.features import Modality, ProblemHParams
from t2t.hparams import views
from t2t.layers import attention, common, feed_forward, local_attention, positional
from t2t.models import t2t_model
from t2t.models.step_interface import SLOTS


class ImageDecoderLayer(common.Layer):
    """Local self-attention and feed-forward, each inside pre/post-processing."""

    def __init__(self, hparams: views.ImagetransformerHParams, pattern: local_attention.LocalPattern, name: str):
        super().__init__(name=name)
        dropout = hparams.layer_prepostprocess_dropout
        pre, post = hparams.layer_preprocess_sequence, hparams.layer_postprocess_sequence
        self.attention_pre = common.PrePostProcess(pre, hparams, dropout, "attention_pre")
        self.attention = local_attention.LocalSelfAttention(
            pattern, hparams.hidden_size, hparams.num_heads, hparams.attention_dropout,
            kernel_initializer=common.initializer(hparams), name="self_attention")
        self.attention_post = common.PrePostProcess(post, hparams, dropout, "attention_post")
        self.ffn_pre = common.PrePostProcess(pre, hparams, dropout, "ffn_pre")
        self.ffn = feed_forward.DenseReluDense(
            hparams.filter_size, hparams.hidden_size, hparams.relu_dropout,
            kernel_initializer=common.initializer(hparams), name="ffn")
        self.ffn_post = common.PrePostProcess(post, hparams, dropout, "ffn_post")

    def _ffn(self, x: tf.Tensor, training: bool | None) -> tf.Tensor:
        y = self.ffn(self.ffn_pre(x, training=training), training=training)
        return self.ffn_post(y, residual=x, training=training)

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        """[B, L, H] -> [B, L, H]."""
        y = self.attention(self.attention_pre(x, training=training), training=training)
        return self._ffn(self.attention_post(y, residual=x, training=training), training)

    def step(self, x: tf.Tensor, index: tf.Tensor, cache: dict) -> tuple[tf.Tensor, dict]:
        """One position [B, 1, H] at `index` -> ([B, 1, H], updated key/value cache)."""
        y, cache = self.attention.step(self.attention_pre(x, training=False), index, cache)
        return self._ffn(self.attention_post(y, residual=x, training=False), False), cache


def _check(hp: views.ImagetransformerHParams, php: ProblemHParams) -> list[int]:
    """The target image shape [H, W, C]; ValueError naming what does not fit."""
    if php.modality.get("targets") != Modality.IMAGE:
        raise ValueError(
            f"imagetransformer generates images, but the problem's targets are "
            f"{php.modality.get('targets')!r}: use an image-target problem (e.g. "
            f"image_fashion_mnist_rev, image_fashion_mnist_gen, img2img_cifar10).")
    shape = list(php.image_shape or [])
    if len(shape) != 3 or any(not d for d in shape):
        raise ValueError(f"imagetransformer needs a fixed target image shape [H, W, C], "
                         f"got {shape}.")
    if hp.pos not in ("timing", "none"):
        raise ValueError(f"pos={hp.pos!r}: use 'timing' or 'none'.")
    return shape


@registry.register_model("imagetransformer")
class Imagetransformer(t2t_model.T2TModel):
    """Decoder-only Image Transformer with local 1-D or 2-D attention (module doc)."""

    HPARAMS_VIEW = views.ImagetransformerHParams

    def __init__(self, hparams, mode=t2t_model.TRAIN, problem_hparams=None, name=None, **kwargs):
        super().__init__(hparams, mode, problem_hparams, name=name, **kwargs)
        hp, php = self.hparams, self.problem_hparams
        height, width, channels = _check(hp, php)
        self.rows, self.cols, self.length = height, width * channels, height * width * channels
        pattern = local_attention.pattern_for(hp, self.rows, self.cols)
        self.decoder_layers = [ImageDecoderLayer(hp, pattern, f"layer_{i}")
                               for i in range(hp.num_decoder_layers or hp.num_hidden_layers)]
        self.final = common.PrePostProcess(hp.layer_preprocess_sequence.replace("a", ""),
                                           hp, 0.0, "final")
        self.input_dropout = common.Dropout(hp.layer_prepostprocess_dropout)
        inputs_kind = php.modality.get("inputs")
        self.condition = None if hp.unconditional else inputs_kind
        self.condition_embedding = None
        if self.condition == Modality.IMAGE:  # super-resolution: (channel, value) of inputs
            self.condition_embedding = self.add_weight(
                name="condition_embedding", shape=(channels * 256, hp.hidden_size),
                initializer=keras.initializers.RandomNormal(0.0, hp.hidden_size**-0.5))
        elif self.condition not in (None, Modality.CLASS_LABEL):
            raise ValueError(f"imagetransformer conditions on a class label or an image, not "
                             f"{inputs_kind!r} inputs: set unconditional=True to ignore them.")

    # ------------------------------------------------------------ conditioning
    def _position_signal(self, positions: tf.Tensor) -> tf.Tensor:
        """[T, hidden] 2-D timing signal of sequence positions [T]: half the channels
        for the row, half for the sub-pixel column."""
        half = self.hparams.hidden_size // 2
        rows = positional.timing_signal_from_positions(positions // self.cols, half)
        cols = positional.timing_signal_from_positions(
            positions % self.cols, self.hparams.hidden_size - half)
        return tf.concat([rows, cols], axis=-1)

    def _image_condition(self, images: tf.Tensor) -> tf.Tensor:
        """uint8 [B, h, w, C] -> [B, L, hidden]: nearest-neighbour upsampled to the target
        size, each sub-pixel embedded by (channel, value)."""
        height, width = self.rows, self.cols // self.targets_modality.channels
        up = tf.image.resize(images, [height, width], method="nearest")
        values = tf.reshape(tf.cast(up, tf.int32), [tf.shape(images)[0], -1])
        channel = tf.range(self.length) % self.targets_modality.channels
        table = tf.cast(self.condition_embedding, self.compute_dtype)
        return tf.gather(table, values + 256 * channel)

    def conditioning(self, features: dict, raw_inputs: tf.Tensor | None) -> tf.Tensor | float:
        """What is added to every position: [B, 1 or L, hidden], or 0.0."""
        if self.condition == Modality.CLASS_LABEL:
            return features["inputs"]  # the class modality's [B, 1, hidden]
        if self.condition == Modality.IMAGE:
            return self._image_condition(raw_inputs)
        return 0.0

    def bottom(self, features, training):
        transformed = super().bottom(features, training)
        if "inputs" in features:
            transformed["raw_inputs"] = features["inputs"]
        return transformed

    # --------------------------------------------------------------------- body
    def body(self, features, training):
        """Embedded sub-pixels [B, L, hidden] -> decoder output [B, L, hidden]."""
        targets = features["targets"]
        x = tf.pad(targets, [[0, 0], [1, 0], [0, 0]])[:, :-1, :]  # shifted right
        if self.hparams.pos == "timing":
            x += tf.cast(self._position_signal(tf.range(self.length)), x.dtype)[None]
        x += tf.cast(self.conditioning(features, features.get("raw_inputs")), x.dtype)
        x = self.input_dropout(x, training=training)
        for layer in self.decoder_layers:
            x = layer(x, training=training)
        return self.final(x, training=training)

    # ---------------------------------------------------------- cached sampling
    @property
    def has_decode_cache(self) -> bool:  # type: ignore[override]
        return True

    def decode_init_cached(self, features: dict, decode_length: tf.Tensor) -> dict:
        """Each layer's key/value cache [B, N, L, D] and the conditioning [B, 1|L, hidden]."""
        batch_size = t2t_model.decode_batch_size(features)
        slots: dict = {}
        if self.condition is not None and "inputs" in features:
            embedded = self.feature_modalities["inputs"].bottom(features["inputs"], training=False)
            slots["condition"] = self.conditioning({"inputs": embedded}, features["inputs"])
        dtype = self.compute_dtype
        for i, layer in enumerate(self.decoder_layers):
            shape = [batch_size, layer.attention.num_heads, self.length, layer.attention.depth]
            slots[f"layer_{i}"] = {"k": attention.empty_cache(shape, dtype),
                                   "v": attention.empty_cache(shape, dtype)}
        return {SLOTS: slots}

    def decode_step_cached(self, previous_ids: tf.Tensor, index: tf.Tensor, state: dict
                           ) -> tuple[tf.Tensor, dict]:
        """Logits [B, 256] of sub-pixel `index` from the one before: every layer on one
        position, attention over its block's cached memory only."""
        modality = self.targets_modality
        index = tf.cast(index, tf.int32)
        x = modality.embed(previous_ids[:, None], tf.maximum(index - 1, 0)[None])
        x = tf.where(index > 0, x, tf.zeros_like(x))  # the shifted-right start
        if self.hparams.pos == "timing":
            x += tf.cast(self._position_signal(index[None]), x.dtype)[None]
        slots = state[SLOTS]
        condition = slots.get("condition")
        if condition is not None:
            if condition.shape[1] != 1:
                condition = tf.gather(condition, index[None], axis=1)
            x += tf.cast(condition, x.dtype)
        new_slots = {k: v for k, v in slots.items() if not k.startswith("layer_")}
        for i, layer in enumerate(self.decoder_layers):
            x, new_slots[f"layer_{i}"] = layer.step(x, index, slots[f"layer_{i}"])
        logits = self.top(self.final(x, training=False), {})
        return tf.cast(logits[:, 0, :], tf.float32), {**state, SLOTS: new_slots}


registry.register_model(Imagetransformer, name="image_transformer")
