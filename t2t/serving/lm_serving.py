"""The signatures of an exported language model (a problem without inputs).

    serving_default   {"inputs": string [B] prompts} -> {"outputs": string [B]
                      continuations (prompt + continuation with return_prompt),
                      "scores": float32 [B]} (+ "samples" string [B, S], "sample_scores"
                      with num_samples > 1; "beams", "beam_scores" with return_beams),
                      decoded with the export's --decode_hparams
    generate          {"inputs", "temperature" float32 [], "top_k" int32 [], "top_p"
                      float32 [], "max_new_tokens" int32 [] (<= 0: the export's), "seed"
                      int64 [] (-1: a random one)} -> the same outputs: greedy
                      (temperature 0) or sampling, each setting chosen per call
    score             {"inputs": string [B] texts} -> {"log_probs": float32 [B] (nats,
                      the text and its EOS), "tokens": int32 [B]}
    serve_tf_example  {"examples": string [B] tf.train.Examples with int64 "targets"
                      prompt ids} -> {"outputs": int64 [B, L] ids, "scores"}

A SavedModel signature has no optional inputs: serving_default is generate with the
export's settings, for clients that set nothing. Prompts are cut to their last
max_input_length tokens, as t2t-decoder cuts them; texts to score (+ EOS) to their
first `max_length` tokens, as t2t.decoding.scoring does.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t.decoding import infer as infer_lib
from t2t.decoding.settings import DecodeSettings
from t2t.serving import tokenizers

GENERATE_SIGNATURE = "generate"
SCORE_SIGNATURE = "score"

_PROMPTS = tf.TensorSpec([None], tf.string, name="inputs")
_SETTINGS = [
    tf.TensorSpec([], tf.float32, name="temperature"),
    tf.TensorSpec([], tf.int32, name="top_k"),
    tf.TensorSpec([], tf.float32, name="top_p"),
    tf.TensorSpec([], tf.int32, name="max_new_tokens"),
    tf.TensorSpec([], tf.int64, name="seed"),
]


class LanguageModelSignatures:
    """Builds the signatures of a language model over its in-graph tokenizer."""

    def __init__(self, model: Any, settings: DecodeSettings, tokenizer: tokenizers.InGraphTokenizer,
                 score_max_length: int):
        self.model, self.settings, self.tokenizer = model, settings, tokenizer
        self.score_max_length = score_max_length
        prompt_ids = tf.TensorSpec([None, None], tf.int32)
        self.run_settings = tf.function(self._run_settings, input_signature=[prompt_ids])
        self.run_generate = tf.function(self._run_generate, input_signature=[prompt_ids, *_SETTINGS])

    # ------------------------------------------------------------- decoding
    def _outputs(self, prompt: tf.Tensor, result: dict[str, tf.Tensor]) -> tuple[tf.Tensor, ...]:
        """(best [B, L], score [B], all [B, K, L], their scores [B, K])."""
        outputs, scores = result["outputs"], result["scores"]
        if outputs.shape.rank == 3:
            return outputs[:, 0], scores[:, 0], outputs, scores
        return outputs, scores, outputs[:, None], scores[:, None]

    def _run_settings(self, prompt):
        s = self.settings
        result = infer_lib.infer(self.model, {"prompt": prompt}, s.new_tokens(0), **s.infer_args())
        return self._outputs(prompt, result)

    def _run_generate(self, prompt, temperature, top_k, top_p, max_new_tokens, seed):
        # <= 0: the export's own number (max_new_tokens, else extra_length), as in DecodeHParams
        max_new_tokens = tf.where(max_new_tokens > 0, max_new_tokens, self.settings.new_tokens(0))
        result = infer_lib.infer(
            self.model, {"prompt": prompt}, max_new_tokens, temperature=temperature,
            top_k=top_k, top_p=top_p, seed=seed, num_samples=self.settings.num_samples)
        return self._outputs(prompt, result)

    def prompts(self, texts: tf.Tensor) -> tf.Tensor:
        """string [B] -> int32 [B, P]: each prompt's last max_input_length ids, 0-padded."""
        ids = tf.cast(self.tokenizer.encode(tokenizers.valid_utf8(texts)), tf.int32)
        return ids[:, -int(self.settings.max_input_length):].to_tensor(0)

    def _texts(self, prompt: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
        """Continuation ids [B, L] (or [B, K, L]) as strings [B] (or [B, K]); prompt +
        continuation, decoded together, with return_prompt."""
        shape = tf.shape(ids)
        flat = tf.reshape(ids, [-1, shape[-1]])
        if self.settings.return_prompt:
            copies = shape[1] if ids.shape.rank == 3 else 1
            prompts = tokenizers.strip_ids(tf.repeat(prompt, copies, axis=0))
            joined = tf.concat([prompts, tokenizers.strip_ids(flat)], axis=1)
            flat = joined.to_tensor(0)
        texts = self.tokenizer.decode(flat)
        return tf.reshape(texts, shape[:-1])

    def _serve(self, texts, run, *settings):
        prompt = self.prompts(texts)
        best, score, every, every_scores = run(prompt, *settings)
        out = {"outputs": self._texts(prompt, best), "scores": score}
        if self.settings.num_samples > 1:
            out["samples"], out["sample_scores"] = self._texts(prompt, every), every_scores
        elif self.settings.return_beams:
            out["beams"], out["beam_scores"] = self._texts(prompt, every), every_scores
        return out

    def text_signature(self):
        @tf.function(input_signature=[_PROMPTS])
        def serve_text(inputs):
            return self._serve(inputs, self.run_settings)

        return serve_text.get_concrete_function()

    def generate_signature(self):
        @tf.function(input_signature=[_PROMPTS, *_SETTINGS])
        def generate(inputs, temperature, top_k, top_p, max_new_tokens, seed):
            return self._serve(inputs, self.run_generate, temperature, top_k, top_p,
                               max_new_tokens, seed)

        return generate.get_concrete_function()

    def examples_signature(self):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve_tf_example(examples):
            parsed = tf.io.parse_example(examples, {"targets": tf.io.RaggedFeature(tf.int64)})
            ids = tokenizers.strip_ids(tf.cast(parsed["targets"], tf.int32).to_tensor(0))
            prompt = ids[:, -int(self.settings.max_input_length):].to_tensor(0)
            best, score, _, _ = self.run_settings(prompt)
            return {"outputs": tf.cast(best, tf.int64), "scores": score}

        return serve_tf_example.get_concrete_function()

    # -------------------------------------------------------------- scoring
    def score_signature(self):
        @tf.function(input_signature=[_PROMPTS])
        def score(inputs):
            ids = tokenizers.append_eos(self.tokenizer.encode(tokenizers.valid_utf8(inputs)))
            if self.score_max_length > 0:  # ids + EOS cut, as t2t.decoding.scoring cuts them
                ids = ids[:, :self.score_max_length]
            logits, _ = self.model({"targets": ids}, training=False)
            log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
            picked = tf.gather(log_probs, ids, batch_dims=2)
            weights = tf.cast(tf.not_equal(ids, 0), tf.float32)
            return {"log_probs": tf.reduce_sum(picked * weights, axis=1),
                    "tokens": tf.reduce_sum(tf.cast(weights, tf.int32), axis=1)}

        return score.get_concrete_function()


def build_signatures(model: Any, encoders: dict[str, Any], settings: DecodeSettings,
                     module: tf.Module, text_signature: bool, score_max_length: int
                     ) -> dict[str, Any]:
    """The language model's signatures (see the module doc); the tokenizer is tracked
    by `module` (targets_tokenizer)."""
    module.targets_tokenizer = tokenizers.from_encoder(encoders.get("targets"))
    builder = LanguageModelSignatures(model, settings, module.targets_tokenizer, score_max_length)
    examples = builder.examples_signature()
    if not text_signature:
        return {"serving_default": examples, "serve_tf_example": examples}
    return {"serving_default": builder.text_signature(),
            GENERATE_SIGNATURE: builder.generate_signature(),
            SCORE_SIGNATURE: builder.score_signature(),
            "serve_tf_example": examples}
