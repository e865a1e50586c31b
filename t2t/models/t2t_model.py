"""T2TModel: the base of every model, a Keras 3 layer split into bottom / body / top / loss.

    model = T2TModel subclass(hparams, mode, problem_hparams)
    logits, losses = model(features, training=True)

`features` maps names to batched tensors ("inputs" [B, S], "targets" [B, T] token ids,
or images [B, H, W, C], plus the packing features "<name>_segmentation" and
"<name>_position"). The problem's hparams choose a modality per feature; the
modalities embed (bottom), project (top) and score (loss), so a subclass usually
writes only `body`. `losses` maps a name to (numerator, denominator) sums over the
batch; the training loss is their ratio, computed by the trainer over all replicas.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t import registry
from t2t.decoding import beam_search, greedy
from t2t.hparams.hparams import HParams
from t2t.layers import common, modalities
from t2t.models import variable_tracking
from t2t.problems import problem as problem_lib

TRAIN, EVAL, PREDICT = problem_lib.TRAIN, problem_lib.EVAL, problem_lib.PREDICT
EOS_ID = 1


class T2TModel(common.Layer):
    """Base class of all models. Subclasses implement `body`."""

    def __init__(
        self,
        hparams: HParams,
        mode: str = TRAIN,
        problem_hparams: problem_lib.ProblemHParams | None = None,
        name: str | None = None,
        **kwargs: Any,
    ):
        if mode not in problem_lib.MODES:
            raise ValueError(f"Unknown mode {mode!r}: use one of {problem_lib.MODES}.")
        if problem_hparams is None:
            raise ValueError(f"{type(self).__name__} needs problem_hparams (problem.hparams(data_dir)).")
        model_name = type(self).__dict__.get("registered_name") or registry.default_name(type(self))
        super().__init__(name=name or model_name, **kwargs)
        self.hparams = hparams.copy()
        self.mode = mode
        self.problem_hparams = problem_hparams
        self.feature_modalities = self._create_modalities()

    # ------------------------------------------------------------ structure
    @property
    def has_inputs(self) -> bool:
        return "inputs" in self.problem_hparams.modality

    @property
    def targets_modality(self) -> modalities.Modality:
        return self.feature_modalities["targets"]

    def _create_modalities(self) -> dict[str, modalities.Modality]:
        hp, php = self.hparams, self.problem_hparams
        created: dict[str, modalities.Modality] = {}
        inputs_kind, targets_kind = php.modality.get("inputs"), php.modality.get("targets")
        share = (
            inputs_kind == targets_kind == modalities.SYMBOL
            and php.vocab_size.get("inputs") == php.vocab_size.get("targets")
            and (hp.get("shared_embedding_and_softmax_weights") or hp.get("shared_embedding"))
        )
        for feature, kind in php.modality.items():
            if share and feature == "inputs":
                continue  # created with the targets, below
            if share and feature == "targets":
                created["targets"] = modalities.create_modality(
                    kind, php.vocab_size[feature], hp, "shared", with_softmax=True
                )
                created["inputs"] = created["targets"]
                continue
            created[feature] = modalities.create_modality(kind, php.vocab_size.get(feature), hp, feature)
        return created

    def _training(self, training: bool | None) -> bool:
        return self.mode == TRAIN if training is None else bool(training)

    # ---------------------------------------------------------------- steps
    def bottom(self, features: dict[str, tf.Tensor], training: bool) -> dict[str, tf.Tensor]:
        """Each modality's embedding of its feature; other features pass through."""
        transformed = dict(features)
        for feature, modality in self.feature_modalities.items():
            if feature not in features:
                continue
            if feature == "targets":
                transformed[feature] = modality.targets_bottom(features[feature], training=training)
            else:
                transformed[feature] = modality.bottom(features[feature], training=training)
        return transformed

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor | tuple[tf.Tensor, dict]:
        """The model proper: embedded features -> a [B, ..., H] output (and extra losses)."""
        raise NotImplementedError(f"{type(self).__name__} must implement body().")

    def top(self, body_output: tf.Tensor, features: dict[str, tf.Tensor]) -> tf.Tensor:
        """Logits of the targets modality."""
        return self.targets_modality.top(body_output)

    def loss(self, logits: tf.Tensor, features: dict[str, tf.Tensor], training: bool) -> tuple[tf.Tensor, tf.Tensor]:
        """(sum of weighted losses, sum of weights); label smoothing only in training."""
        smoothing = self.hparams.get("label_smoothing", 0.0) if training else 0.0
        numerator, denominator = self.targets_modality.loss(logits, features["targets"], smoothing)
        return numerator * self.problem_hparams.loss_multiplier, denominator

    def call(self, features: dict[str, tf.Tensor], training: bool | None = None) -> tuple[tf.Tensor, dict]:
        """(logits, {loss name: (numerator, denominator)}); the training loss is "training"."""
        training = self._training(training)
        transformed = self.bottom(features, training)
        output = self.body(transformed, training)
        extra = {}
        if isinstance(output, tuple):
            output, extra = output
        logits = self.top(output, features)
        losses = {name: (value, tf.constant(1.0)) for name, value in extra.items()}
        if "targets" in features:
            losses["training"] = self.loss(logits, features, training)
        return logits, losses

    def build_for(self, features: dict[str, tf.Tensor]) -> None:
        """Creates every weight by calling the model once (do it inside strategy.scope())."""
        self(features, training=False)

    def _trackable_children(self, save_type: Any = "checkpoint", **kwargs: Any) -> dict:
        # Checkpoints name variables by attribute path (see variable_tracking): stable
        # across processes, and complete even for layers kept in lists and dicts.
        children = dict(super()._trackable_children(save_type, **kwargs))
        if str(getattr(save_type, "value", save_type)) == "checkpoint":
            children = {}
        children.update(variable_tracking.named_variables(self))
        return children

    # ------------------------------------------------------------ inference
    def infer(
        self,
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
        [B, 1]. `use_cache=False` forces the path that re-runs the whole model on the
        prefix at each step (for models with a cache, to check it).
        """
        features = {k: v for k, v in features.items() if k != "targets"}
        if self.problem_hparams.modality.get("targets") == modalities.CLASS_LABEL:
            logits, _ = self(features, training=False)
            log_probs = tf.nn.log_softmax(tf.cast(logits[:, 0, :], tf.float32))
            outputs = tf.argmax(log_probs, axis=-1, output_type=tf.int32)[:, None]
            scores = tf.reduce_max(log_probs, axis=-1)
            if top_beams > 1:
                values, ids = tf.math.top_k(log_probs, k=top_beams)
                return {"outputs": ids[:, :, None], "scores": values}
            return {"outputs": outputs, "scores": scores}
        if beam_size < 1 or top_beams < 1 or top_beams > max(beam_size, 1):
            raise ValueError(
                f"Need 1 <= top_beams <= beam_size, got beam_size={beam_size}, top_beams={top_beams}."
            )
        reference = features.get("inputs")
        batch_size = tf.shape(reference)[0] if reference is not None else tf.constant(1)
        length = tf.cast(decode_length, tf.int32)
        cached = use_cache and self.has_decode_cache
        init = self.decode_init_cached if cached else self.decode_init
        step = self.decode_step_cached if cached else self.decode_step
        if beam_size > 1:
            state = tf.nest.map_structure(
                lambda t: beam_search.tile_beams(t, beam_size), init(features, length)
            )
            ids, scores = beam_search.beam_search(
                step, state, batch_size, beam_size, length,
                self.problem_hparams.vocab_size["targets"], alpha=alpha, eos_id=EOS_ID,
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

    # A model with an incremental decoder sets this and implements the *_cached pair.
    has_decode_cache = False

    def decode_init(self, features: dict[str, tf.Tensor], decode_length: tf.Tensor) -> dict:
        """State of the uncached decoder: the features and a targets buffer [B, L]."""
        reference = features.get("inputs")
        batch_size = tf.shape(reference)[0] if reference is not None else tf.constant(1)
        return {**features, "targets": tf.zeros([batch_size, decode_length], tf.int32)}

    def decode_step(self, previous_ids: tf.Tensor, index: tf.Tensor, state: dict) -> tuple[tf.Tensor, dict]:
        """Logits [B, V] at position `index`, re-running the model on the whole prefix.

        previous_ids [B] is the token chosen at index - 1; it is written into the buffer
        first. Positions after `index` hold zeros, which a causal model never reads."""
        targets = state["targets"]
        at = tf.cast(tf.equal(tf.range(tf.shape(targets)[1]), index - 1), targets.dtype)[None, :]
        targets = targets * (1 - at) + previous_ids[:, None] * at
        state = {**state, "targets": targets}
        logits, _ = self(state, training=False)
        return tf.gather(tf.cast(logits, tf.float32), index, axis=1), state

    def decode_init_cached(self, features: dict[str, tf.Tensor], decode_length: tf.Tensor) -> dict:
        raise NotImplementedError(f"{type(self).__name__} has no cached decoder.")

    def decode_step_cached(self, previous_ids, index, state):
        raise NotImplementedError(f"{type(self).__name__} has no cached decoder.")


def create_model(
    model_name: str,
    hparams: HParams,
    mode: str,
    problem_hparams: problem_lib.ProblemHParams,
) -> T2TModel:
    """The registered model `model_name` built for the problem."""
    cls = registry.model(model_name)
    return cls(hparams, mode, problem_hparams)
