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
from t2t.features import EOS_ID, EVAL, MODES, PCM_OFFSET, PREDICT, TRAIN, Modality, ProblemHParams
from t2t.hparams import views
from t2t.hparams.hparams import HParams, HParamsError
from t2t.layers import common, modalities

__all__ = ["EOS_ID", "EVAL", "PREDICT", "TRAIN", "SMALL_IMAGE_MODEL", "T2TModel", "check_modalities",
           "create_model", "decode_batch_size", "example_features"]

# The model whose SMALL_IMAGE_HPARAMS_SETS are named for a model that declares none.
SMALL_IMAGE_MODEL = "resnet"


class T2TModel(common.Layer):
    """Base class of all models. Subclasses implement `body`."""

    # Mesh TensorFlow's names of each weight's axes, for laying the model out on a mesh
    # (hparams mesh_shape/layout; t2t.parallel.sharding): (regular expression on the
    # variable path, one name or None per axis), first match wins. Unnamed weights are
    # replicated; a model without rules can only split the batch.
    WEIGHT_DIMENSIONS: tuple[tuple[str, tuple[str | None, ...]], ...] = ()
    # Why the model cannot have its batch split on a mesh (None: it can).
    MESH_BATCH_SPLIT_ERROR: str | None = None
    # The model's hparams sets made for small images (28-32 px: MNIST, CIFAR), which
    # the trainer names when training on such images diverges (Task.divergence_hint);
    # () for a model that has none: the advice then names SMALL_IMAGE_MODEL's.
    SMALL_IMAGE_HPARAMS_SETS: tuple[str, ...] = ()
    # The typed view of the hparams the model reads (t2t.hparams.views); create_model
    # checks a set against it and the views of the problem's modalities.
    HPARAMS_VIEW: type = views.ModelHParams
    # The model's own hparams that shape its variables, beyond those of the shared layers
    # (t2t.trainer.run_dir.STRUCTURAL_HPARAMS): a run cannot resume with other values.
    STRUCTURAL_HPARAMS: frozenset[str] = frozenset()

    def __init__(
        self,
        hparams: HParams,
        mode: str = TRAIN,
        problem_hparams: ProblemHParams | None = None,
        name: str | None = None,
        **kwargs: Any,
    ):
        if mode not in MODES:
            raise ValueError(f"Unknown mode {mode!r}: use one of {MODES}.")
        if problem_hparams is None:
            raise ValueError(f"{type(self).__name__} needs problem_hparams (problem.hparams(data_dir)).")
        model_name = type(self).__dict__.get("registered_name") or registry.default_name(type(self))
        super().__init__(name=name or model_name, **kwargs)
        self.hparams = hparams.copy()
        self.mode = mode
        self.problem_hparams = problem_hparams
        # True when the training step is XLA-compiled (the trainer sets it): layers then
        # use only ops XLA compiles (e.g. dense-label CTC), not faster CPU/GPU kernels.
        self.xla_ops_only = False
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
            and (hp.shared_embedding_and_softmax_weights or hp.shared_embedding)
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
            created[feature] = modalities.create_modality(
                kind, php.vocab_size.get(feature), hp, feature,
                sample_rate=php.audio_sample_rate, image_shape=php.image_shape)
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
        smoothing = self.hparams.label_smoothing if training else 0.0
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

    def build_weights(self) -> None:
        """Creates every weight from a one-example batch of the problem's features."""
        self.build_for(example_features(self.problem_hparams))

    # ------------------------------------------------------------ decoding
    # The step interface of t2t.models.step_interface: the decoding algorithms
    # (t2t.decoding.infer) drive these; a model never imports them.
    # A model with an incremental decoder sets this and implements the *_cached pair.
    has_decode_cache = False

    def decode_init(self, features: dict[str, tf.Tensor], decode_length: tf.Tensor) -> dict:
        """State of the uncached decoder: the features and a targets buffer [B, L]."""
        batch_size = decode_batch_size(features)
        return {**features, "targets": tf.zeros([batch_size, decode_length], tf.int32)}

    def decode_step(self, previous_ids: tf.Tensor, index: tf.Tensor, state: dict) -> tuple[tf.Tensor, dict]:
        """Logits [B, V] at position `index`, re-running the model on the whole prefix.

        previous_ids [B] is the token chosen at index - 1; it is written into the buffer
        first. Positions after `index` hold zeros, which a causal model never reads."""
        state = {**state, "targets": write_previous_ids(state["targets"], previous_ids, index)}
        logits, _ = self(state, training=False)
        return tf.gather(tf.cast(logits, tf.float32), index, axis=1), state

    def decode_init_cached(self, features: dict[str, tf.Tensor], decode_length: tf.Tensor) -> dict:
        raise NotImplementedError(f"{type(self).__name__} has no cached decoder.")

    def decode_step_cached(self, previous_ids, index, state):
        raise NotImplementedError(f"{type(self).__name__} has no cached decoder.")


def write_previous_ids(targets: tf.Tensor, previous_ids: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """The targets buffer [B, L] with previous_ids [B] written at position index - 1
    (nothing is written at index 0)."""
    at = tf.cast(tf.equal(tf.range(tf.shape(targets)[1]), index - 1), targets.dtype)[None, :]
    return targets * (1 - at) + tf.cast(previous_ids, targets.dtype)[:, None] * at


def decode_batch_size(features: dict[str, tf.Tensor]) -> tf.Tensor:
    """The batch size of a decode: rows of "inputs", else of "targets" (a language
    model's prompts), else 1."""
    reference = features.get("inputs", features.get("targets"))
    return tf.shape(reference)[0] if reference is not None else tf.constant(1)


def check_modalities(model_name: str, modality: dict[str, str], inputs: tuple[str, ...],
                     targets: tuple[str, ...], detail: str = "") -> None:
    """ValueError unless the problem's `modality` (feature -> t2t.features.Modality) has
    its inputs among `inputs` and its targets among `targets`, e.g. "bytenet maps symbol
    inputs to symbol targets, but the problem's modalities are {...}." (`detail` follows
    "targets")."""
    if modality.get("inputs") in inputs and modality.get("targets") in targets:
        return

    def spelled(kinds: tuple[str, ...]) -> str:
        return " or ".join(kind.replace("_", "-") for kind in kinds)

    raise ValueError(f"{model_name} maps {spelled(inputs)} inputs to {spelled(targets)} "
                     f"targets{detail}, but the problem's modalities are {modality}.")


def example_features(problem_hparams: ProblemHParams) -> dict[str, tf.Tensor]:
    """A one-example batch with every feature the problem's model expects (to build
    weights): token ids int32 [1, 4], labels [1, 1], images uint8 [1, H, W, C], audio
    PCM ids [1, sample_rate / 10]."""
    features = {}
    for name, kind in problem_hparams.modality.items():
        if kind == Modality.IMAGE:
            shape = problem_hparams.image_shape or [32, 32, 3]
            features[name] = tf.zeros([1, *shape], tf.uint8)
        elif kind == Modality.CLASS_LABEL:
            features[name] = tf.ones([1, 1], tf.int32)
        elif kind == Modality.REAL:
            features[name] = tf.zeros([1, 4, problem_hparams.vocab_size.get(name) or 1])
        elif kind == Modality.AUDIO:  # 0.1 s of silence
            samples = (problem_hparams.audio_sample_rate or 16000) // 10
            features[name] = tf.fill([1, samples], PCM_OFFSET)
        else:
            features[name] = tf.ones([1, 4], tf.int32)
    return features


def hparams_views(model_cls: type[T2TModel], problem_hparams: ProblemHParams | None
                  ) -> tuple[type, ...]:
    """The views (t2t.hparams.views) of the hparams `model_cls` reads when built for the
    problem: its HPARAMS_VIEW, then the view of each of the problem's modalities."""
    modality = problem_hparams.modality if problem_hparams else {}
    return (model_cls.HPARAMS_VIEW,
            *(views.modality_view(kind, feature) for feature, kind in modality.items()))


def create_model(
    model_name: str,
    hparams: HParams,
    mode: str,
    problem_hparams: ProblemHParams,
) -> T2TModel:
    """The registered model `model_name` built for the problem.

    HParamsError when the hparams set lacks an hparam the model reads, or holds one of
    another type (its view, HPARAMS_VIEW, and the modalities' views say which; sets
    derived from the model's base set, e.g. transformer_base, hold them all)."""
    cls = registry.model(model_name)
    views.check(hparams, *hparams_views(cls, problem_hparams), model=model_name)
    try:
        return cls(hparams, mode, problem_hparams)
    except AttributeError as e:
        missing = getattr(e, "hparam_name", None)
        if missing is None:
            raise
        sets = views.sets_defining(missing, model_name)
        hint = f" Sets that have it: {', '.join(sets[:8])}." if sets else ""
        raise HParamsError(
            f"Model {model_name!r} reads hparam {missing!r}, which these hparams do not "
            f"define: use an hparams set built for it.{hint}"
        ) from e
