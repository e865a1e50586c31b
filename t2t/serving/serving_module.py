"""The tf.Module a SavedModel export saves, and its signatures.

    serving_default   {"inputs": string [B]} raw text (image problems: encoded PNG/JPEG
                      bytes; speech problems: WAV files' bytes, 16-bit mono at the
                      problem's sample rate) -> {"outputs": string [B], "scores": float32 [B]}
                      (+ "beams" string [B, K], "beam_scores" [B, K] with return_beams)
    serve_tf_example  {"examples": string [B]} serialized tf.train.Examples with int64
                      "inputs" ids (images: "image/encoded") -> {"outputs": int64 [B, L]
                      ids, 0 after EOS, "scores"} (+ "beams" int64 [B, K, L], ...); speech:
                      "audio/encoded" PCM16 bytes as t2t-datagen stores them
    attention         text problems of models with encoder-decoder attention (transformer):
                      {"inputs": string [B], "outputs": string [B]} -> {"weights":
                      float32 [B, layers, heads, T, S], "source_tokens": string [B, S],
                      "target_tokens": string [B, T], "source_length", "target_length":
                      int32 [B]}: the model teacher-forced on each output (+ EOS), as
                      t2t.decoding.attention_maps computes it; row t is the step that
                      predicts target token t. Tokens: "<EOS>", and "" for padding.

How the weights are held: the module tracks the model's underlying `tf.Variable`s
(`keras.Variable.value`) in a list, and the signatures are closures over the model, so
the Keras model itself is not part of the saved object graph. Tracking the Keras model
(or its `keras.Variable`s) saves a SavedModel that `saved_model_cli show` accepts but
that fails in `saved_model_cli run` / TF Serving with "Could not find variable".
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t.decoding import audio_inputs
from t2t.decoding import infer as infer_lib
from t2t.decoding.settings import DecodeSettings
from t2t.features import Modality
from t2t.models import variable_names
from t2t.serving import audio_serving, tokenizers

TEXT_SIGNATURE = "serving_default"
EXAMPLES_SIGNATURE = "serve_tf_example"
ATTENTION_SIGNATURE = "attention"


class ExportError(ValueError):
    """A model or problem that cannot be exported as asked."""


def underlying_variables(model: Any) -> list[tf.Variable]:
    """The tf.Variables that hold the model's weights (what its graph reads)."""
    found, seen = [], set()
    for variable in [*model.variables, *variable_names.named_variables(model).values()]:
        inner = variable if isinstance(variable, tf.Variable) else variable.value
        if not isinstance(inner, tf.Variable):
            raise ExportError(f"cannot find the tf.Variable of {getattr(variable, 'path', variable)}")
        if id(inner) not in seen:
            seen.add(id(inner))
            found.append(inner)
    return found


def _model_input_spec(problem_name: str, php: Any) -> tf.TensorSpec:
    """What the model decodes: int32 ids [B, L] (audio: PCM ids), or uint8 images
    [B, H, W, C]."""
    kind = php.modality.get("inputs")
    if php.modality.get("targets") == Modality.IMAGE:
        raise ExportError(
            f"{problem_name} generates images, which the export does not serve (its "
            "signatures return text); sample them with t2t-decoder "
            "--decode_hparams=num_samples=N,temperature=1.0, which writes PNG files.")
    if kind in (Modality.SYMBOL, Modality.AUDIO):
        return tf.TensorSpec([None, None], tf.int32)
    if kind != Modality.IMAGE:
        raise ExportError(f"{problem_name}: cannot serve {kind} inputs.")
    shape = list(php.image_shape or [])
    if len(shape) != 3 or any(d is None for d in shape):
        raise ExportError(
            f"{problem_name}: images of varying size ({shape}); serving needs a fixed image_size."
        )
    return tf.TensorSpec([None, *shape], tf.uint8)


def _decode_images_fn(image_shape: list[int]):
    """Encoded PNG/JPEG/GIF/BMP bytes [B] -> uint8 [B, H, W, C], resized if needed."""
    height, width, channels = image_shape

    def one(data):
        image = tf.io.decode_image(data, channels=channels if channels in (1, 3, 4) else 0,
                                   dtype=tf.uint8, expand_animations=False)
        same = tf.reduce_all(tf.equal(tf.shape(image)[:2], [height, width]))
        image = tf.cond(
            same, lambda: image,
            lambda: tf.cast(tf.clip_by_value(tf.round(
                tf.image.resize(image, [height, width])), 0, 255), tf.uint8),
        )
        return tf.ensure_shape(image, image_shape)

    def decode_images(encoded):
        return tf.map_fn(one, encoded, fn_output_signature=tf.TensorSpec(image_shape, tf.uint8))

    return decode_images


class _Builder:
    """Builds the signatures over one traced decode of the model."""

    def __init__(self, model: Any, settings: DecodeSettings, input_spec: tf.TensorSpec):
        self.model, self.settings = model, settings
        self.is_image = input_spec.dtype == tf.uint8
        self.is_audio = model.problem_hparams.modality.get("inputs") == Modality.AUDIO
        self.sample_rate = model.problem_hparams.audio_sample_rate
        self.is_class_label = model.problem_hparams.is_classifier
        self.image_shape = input_spec.shape.as_list()[1:]
        self.decode_images = _decode_images_fn(self.image_shape) if self.is_image else None
        self.run_model = tf.function(self._run_model, input_signature=[input_spec])

    def _run_model(self, inputs):
        """The model's decode of prepared inputs -> (best [B, L], score [B], beams
        [B, K, L], beam scores [B, K]), as t2t's Decoder runs it."""
        s = self.settings
        longest = tf.shape(inputs)[1] if not self.is_image else 0
        if self.is_audio:  # t2t.decoding.audio_inputs.decode_budget
            longest = (longest * audio_inputs.CHARS_PER_SECOND + self.sample_rate - 1
                       ) // self.sample_rate
        decode_length = s.max_new_tokens or longest + s.extra_length  # settings.new_tokens
        result = infer_lib.infer(self.model, {"inputs": inputs}, decode_length, **s.infer_args())
        outputs, scores = result["outputs"], result["scores"]
        if outputs.shape.rank == 3:  # beams, or num_samples samples: the first is the output
            return outputs[:, 0], scores[:, 0], outputs, scores
        return outputs, scores, outputs[:, None], scores[:, None]

    def _prepare_ids(self, ragged):
        """Stored ids (ragged, EOS included) -> cut at EOS, to max_input_length, + EOS."""
        return tokenizers.append_eos(tokenizers.strip_ids(tf.cast(ragged, tf.int32).to_tensor(0)),
                                     int(self.settings.max_input_length))

    def examples_signature(self):
        """serve_tf_example: serialized tf.train.Examples in, ids out (stock ops only)."""

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve_tf_example(examples):
            if self.is_image:
                parsed = tf.io.parse_example(
                    examples, {"image/encoded": tf.io.FixedLenFeature((), tf.string)})
                inputs = self.decode_images(parsed["image/encoded"])
            elif self.is_audio:
                parsed = tf.io.parse_example(
                    examples, {"audio/encoded": tf.io.FixedLenFeature((), tf.string)})
                inputs = audio_serving.pcm16_ids(parsed["audio/encoded"])
            else:
                parsed = tf.io.parse_example(examples, {"inputs": tf.io.RaggedFeature(tf.int64)})
                inputs = self._prepare_ids(parsed["inputs"])
            best, score, beams, beam_scores = self.run_model(inputs)
            out = {"outputs": tf.cast(best, tf.int64), "scores": score}
            if self.settings.return_beams:
                out["beams"] = tf.cast(beams, tf.int64)
                out["beam_scores"] = beam_scores
            return out

        return serve_tf_example.get_concrete_function()

    def _texts(self, target_tok, best, beams):
        """Decoded ids as strings: outputs [B], and beams [B, K] with return_beams."""
        if self.is_class_label:
            outputs = target_tok.decode(best[:, 0])
            return outputs, target_tok.decode(beams[:, :, 0]) if self.settings.return_beams else None
        outputs = target_tok.decode(best)
        if not self.settings.return_beams:
            return outputs, None
        shape = tf.shape(beams)
        flat = tf.reshape(beams, [shape[0] * shape[1], shape[2]])
        return outputs, tf.reshape(target_tok.decode(flat), shape[:2])

    def text_signature(self, module: tf.Module):
        """serving_default: raw strings in, decoded strings out (tokenizers in the graph)."""

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def serve_text(inputs):
            if self.is_image:
                prepared = self.decode_images(inputs)
            elif self.is_audio:
                prepared = audio_serving.wav_ids(inputs, self.sample_rate)
            else:
                text = tokenizers.valid_utf8(inputs)
                prepared = module.inputs_tokenizer.encode_for_model(
                    text, int(self.settings.max_input_length))
            best, score, beams, beam_scores = self.run_model(prepared)
            outputs, beam_texts = self._texts(module.targets_tokenizer, best, beams)
            out = {"outputs": outputs, "scores": score}
            if self.settings.return_beams:
                out["beams"], out["beam_scores"] = beam_texts, beam_scores
            return out

        return serve_text.get_concrete_function()

    def attention_signature(self, module: tf.Module):
        """attention: (input text, output text) -> encoder-decoder attention and tokens."""
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs"),
                                      tf.TensorSpec([None], tf.string, name="outputs")])
        def attention(inputs, outputs):
            source = module.inputs_tokenizer.encode_for_model(
                tokenizers.valid_utf8(inputs), int(self.settings.max_input_length))
            target = module.targets_tokenizer.encode_for_model(tokenizers.valid_utf8(outputs))
            weights = self.model.encdec_attention_weights({"inputs": source, "targets": target})
            lengths = [tf.reduce_sum(tf.cast(ids != tokenizers.PAD_ID, tf.int32), axis=1)
                       for ids in (source, target)]
            return {"weights": tf.cast(weights, tf.float32),
                    "source_tokens": token_strings(module.inputs_tokenizer, source),
                    "target_tokens": token_strings(module.targets_tokenizer, target),
                    "source_length": lengths[0], "target_length": lengths[1]}

        return attention.get_concrete_function()


def token_strings(tokenizer: tokenizers.InGraphTokenizer, ids: tf.Tensor) -> tf.Tensor:
    """ids int [B, L] -> string [B, L], one display string per id as
    t2t.decoding.attention_maps.token_strings gives: "<EOS>", "" for PAD."""
    ids = tf.cast(ids, tf.int32)
    flat = tf.reshape(ids, [-1])
    if isinstance(tokenizer, tokenizers.SentencePieceTokenizer):
        pieces = tokenizer.sp.id_to_string(flat)  # the piece, "▁" and all
    else:
        pieces = tokenizer.decode(flat[:, None])
    pieces = tf.where(flat == tokenizers.EOS_ID, "<EOS>",
                      tf.where(flat == tokenizers.PAD_ID, "", pieces))
    return tf.reshape(pieces, tf.shape(ids))


def has_attention_signature(model: Any, is_image: bool) -> bool:
    """Text problems of models with encoder-decoder attention get the attention signature."""
    php = model.problem_hparams
    return (not is_image and not php.is_classifier and not php.is_language_model
            and php.modality.get("targets") == Modality.SYMBOL
            and bool(getattr(model, "has_encdec_attention", False)))


def build_serving_module(
    model: Any,
    problem: Any,
    encoders: dict[str, Any],
    settings: DecodeSettings,
    *,
    text_signature: bool = True,
) -> tuple[tf.Module, dict[str, Any]]:
    """(tf.Module to save, {signature name: concrete function}) of a loaded model.

    Without `text_signature`, serving_default is the tf.Example signature (no in-graph
    tokenizer, so no tensorflow_text ops). A language model (no inputs) gets the
    signatures of t2t.serving.lm_serving."""
    module = tf.Module(name="t2t_serving")
    if model.problem_hparams.is_language_model:
        from t2t.serving import lm_serving

        module.model_variables = underlying_variables(model)
        hparams = getattr(model, "hparams", None)
        max_length = int(hparams.max_length) if hparams is not None and "max_length" in hparams else 0
        return module, lm_serving.build_signatures(model, encoders, settings, module,
                                                   text_signature, max_length)
    builder = _Builder(model, settings, _model_input_spec(problem.name, model.problem_hparams))
    # Plain tf.Variables (not the Keras model): see the module docstring.
    module.model_variables = underlying_variables(model)
    examples = builder.examples_signature()
    if not text_signature:
        return module, {TEXT_SIGNATURE: examples, EXAMPLES_SIGNATURE: examples}
    if not builder.is_image and not builder.is_audio:
        module.inputs_tokenizer = tokenizers.from_encoder(encoders.get("inputs"))
    module.targets_tokenizer = tokenizers.from_encoder(encoders.get("targets"))
    signatures = {TEXT_SIGNATURE: builder.text_signature(module), EXAMPLES_SIGNATURE: examples}
    if has_attention_signature(model, builder.is_image or builder.is_audio):
        signatures[ATTENTION_SIGNATURE] = builder.attention_signature(module)
    return module, signatures
