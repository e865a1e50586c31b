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
    generate_start    generate's inputs -> the decoding state after the prompt (STATE below)
    generate_step     STATE -> STATE after one more token, and "token" int32 [R] (the
                      token of this step), "generated" bool [R] (a new token: after the
                      prompt, before EOS), "outputs" string [R] (generate's text so far)

generate_start / generate_step are generate's loop cut at each token, for t2t-serve's
streaming (t2t.serving.lm_streaming): a caller feeds each step's STATE outputs to the
next step until its row is "finished"; that row's "outputs" and "scores" then equal
generate's, token for token (the same step, sampling keys, cache and batch; the prompt
is fed in generate_start's own loop). Rows are generate's too: with the export's
num_samples S > 1, row b * S + s is sample s of prompt b, and row b * S generate's
"outputs" for prompt b (rows R = B * S). STATE: "index" int32 [], "ids" int32 [R, L],
"scores" float32 [R], "finished" bool [R], "prompt_ids" int32 [R, P], "keys" int64
[R, 2] (sampling row keys), "max_new_tokens", "temperature", "top_k", "top_p" (scalars)
and the model's decoding cache as "model_state_NN" tensors.

A SavedModel signature has no optional inputs: serving_default is generate with the
export's settings, for clients that set nothing. Prompts are cut to their last
max_input_length tokens, as t2t-decoder cuts them; texts to score (+ EOS) to their
first `max_length` tokens, as t2t.decoding.scoring does.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t.decoding import beam_search, prompting, sampling
from t2t.decoding import infer as infer_lib
from t2t.decoding.settings import DecodeSettings
from t2t.features import EOS_ID
from t2t.serving import tokenizers

GENERATE_SIGNATURE = "generate"
SCORE_SIGNATURE = "score"
STREAM_START_SIGNATURE = "generate_start"
STREAM_STEP_SIGNATURE = "generate_step"
MODEL_STATE_PREFIX = "model_state_"
# The decoding loop's variables in STATE (greedy.greedy_or_sample's).
_LOOP_STATE = ("index", "ids", "scores", "finished")

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
        self._state_structure: Any = None  # the model's decoding state (set by _stream_start)
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

    # ------------------------------------------------------------ streaming
    def _model_state(self, state: dict[str, tf.Tensor]) -> Any:
        count = len(tf.nest.flatten(self._state_structure))
        names = [f"{MODEL_STATE_PREFIX}{i:02d}" for i in range(count)]
        return tf.nest.pack_sequence_as(self._state_structure, [state[n] for n in names])

    def _named_model_state(self, model_state: Any) -> dict[str, tf.Tensor]:
        leaves = tf.nest.flatten(model_state)
        return {f"{MODEL_STATE_PREFIX}{i:02d}": t for i, t in enumerate(leaves)}

    def _one_token(self, state: dict[str, tf.Tensor]) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        """One pass of greedy.greedy_or_sample's loop body, with generate's forced prompt
        and EOS (infer's step): (STATE after it, the chosen token int32 [B])."""
        model = self.model
        model_step = model.decode_step_cached if model.has_decode_cache else model.decode_step
        step_fn = prompting.forced_step(model_step, state["prompt_ids"], state["max_new_tokens"],
                                        EOS_ID)
        i, ids, scores, finished = (state[k] for k in _LOOP_STATE)
        previous = tf.where(i > 0, tf.gather(ids, tf.maximum(i - 1, 0), axis=1), 0)
        logits, model_state = step_fn(previous, i, self._model_state(state))
        logits = tf.cast(logits, tf.float32)
        chosen = sampling.sample(logits, state["temperature"], state["top_k"], state["top_p"],
                                 keys=state["keys"], step=i)
        picked = tf.gather(tf.nn.log_softmax(logits), chosen, batch_dims=1)
        chosen = tf.where(finished, tf.zeros_like(chosen), chosen)
        scores += tf.where(finished, 0.0, picked)
        at_i = tf.cast(tf.equal(tf.range(tf.shape(ids)[1]), i), tf.int32)[None, :]
        ids = ids * (1 - at_i) + chosen[:, None] * at_i
        return {**state, "index": i + 1, "ids": ids, "scores": scores,
                "finished": finished | tf.equal(chosen, EOS_ID),
                **self._named_model_state(model_state)}, chosen

    def _text_so_far(self, state: dict[str, tf.Tensor]) -> tf.Tensor:
        """string [B]: generate's "outputs" for the tokens made so far."""
        prompt = state["prompt_ids"]
        ids = prompting.continuation(state["ids"], prompting.prompt_lengths(prompt),
                                     state["max_new_tokens"])
        return self._texts(prompt, ids)

    def _stream_start(self, texts, temperature, top_k, top_p, max_new_tokens, seed):
        """generate's loop up to the end of the shortest prompt: STATE and "outputs".
        Rows are infer's: each prompt's num_samples copies, sample s of prompt b in row
        b * num_samples + s (generate's "outputs" are each prompt's first sample)."""
        prompt = self.prompts(texts)
        new_tokens = tf.cast(tf.where(max_new_tokens > 0, max_new_tokens,
                                      self.settings.new_tokens(0)), tf.int32)
        length = tf.shape(prompt)[1] + new_tokens + 1  # as infer's: every row ends with EOS
        copies = self.settings.num_samples
        if copies > 1:  # the same batch as generate's: float results depend on its size
            prompt = beam_search.tile_beams(prompt, copies)
        batch = tf.shape(prompt)[0]
        model = self.model
        init = model.decode_init_cached if model.has_decode_cache else model.decode_init
        model_state = init({"targets": prompt}, length)
        self._state_structure = model_state
        sample_index = tf.tile(tf.range(copies), [batch // copies])  # as infer's keys
        keys = sampling.row_keys(sampling.resolve_seed(seed), prompt, sample_index)
        state = {"index": tf.constant(0), "ids": tf.zeros([batch, length], tf.int32),
                 "scores": tf.zeros([batch], tf.float32), "finished": tf.zeros([batch], tf.bool),
                 "prompt_ids": prompt, "keys": keys, "max_new_tokens": new_tokens,
                 "temperature": temperature, "top_k": top_k, "top_p": top_p,
                 **self._named_model_state(model_state)}
        names = sorted(state)
        shortest = tf.reduce_min(prompting.prompt_lengths(prompt))

        def body(*values):
            after, _ = self._one_token(dict(zip(names, values, strict=True)))
            return [after[n] for n in names]

        values = [state[n] for n in names]
        values = tf.while_loop(lambda *v: v[names.index("index")] < shortest, body, values,
                               shape_invariants=beam_search.batch_invariants(values))
        state = dict(zip(names, values, strict=True))
        return {**state, "outputs": self._text_so_far(state)}

    def _stream_step(self, state):
        after, chosen = self._one_token(state)
        lengths = prompting.prompt_lengths(state["prompt_ids"])
        generated = ((state["index"] >= lengths) & tf.logical_not(state["finished"])
                     & tf.not_equal(chosen, EOS_ID))
        return {**after, "token": chosen, "generated": generated,
                "outputs": self._text_so_far(after)}

    def stream_signatures(self) -> tuple[Any, Any]:
        """(generate_start, generate_step) concrete functions (see the module doc)."""
        start = tf.function(self._stream_start, input_signature=[_PROMPTS, *_SETTINGS])
        start = start.get_concrete_function()
        specs = {name: tf.TensorSpec(t.shape, t.dtype, name=name)
                 for name, t in start.structured_outputs.items() if name != "outputs"}
        step = tf.function(self._stream_step, input_signature=[specs]).get_concrete_function()
        return start, step

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
    start, step = builder.stream_signatures()
    return {"serving_default": builder.text_signature(),
            GENERATE_SIGNATURE: builder.generate_signature(),
            SCORE_SIGNATURE: builder.score_signature(),
            STREAM_START_SIGNATURE: start, STREAM_STEP_SIGNATURE: step,
            "serve_tf_example": examples}
