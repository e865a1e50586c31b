"""Keras 3 optimizers built from Tensor2Tensor hparams.

`create_optimizer(hparams, learning_rate)` picks by `hparams.optimizer` (any case, so
T2T's "Adam", "Momentum", "Adafactor" work):

- adam (alias true_adam): `keras.optimizers.Adam` with optimizer_adam_beta1/beta2/epsilon.
  Dense Adam: T2T used LazyAdam, which updates only the embedding rows a batch touches;
  for dense gradients the two are the same algorithm (same epsilon placement).
- adamw (alias adam_w): `keras.optimizers.AdamW`, decoupled weight decay
  `hparams.weight_decay` (Keras multiplies it by the learning rate; T2T's contrib AdamW
  did not), variables whose name contains "bias" excluded.
- sgd: plain gradient descent. momentum: SGD with optimizer_momentum_momentum and
  optimizer_momentum_nesterov (Keras folds the learning rate into the accumulator, TF1
  applied the current rate to it: identical for a constant rate).
- adafactor: `Adafactor` below, a subclass of `keras.optimizers.Adafactor` that follows
  T2T's AdafactorOptimizer exactly; see its docstring for the hparam mapping.

Gradient clipping (`hparams.clip_grad_norm`, 0 disables) is NOT done by the optimizer:
the trainer calls `clip_gradients(grads, clip_norm)` before `apply_gradients`. Keras'
`global_clipnorm` is wrong under MirroredStrategy: Keras 3 clips each replica's partial
gradient before it sums them (measured: 2 replicas with partial gradients [1,1,0,0] and
[0,0,1,1], clip 1.0, give an update of norm 1.41, not 1.0). `clip_gradients` clips by the
norm of the replica sum, as T2T clipped the gradient of the whole batch.

Weight decay (`hparams.weight_decay`) follows T2T: an L2 term added to the loss,
`weight_decay * sum(sum(v**2) / 2)` over all variables except 1-D ones named "...bias",
from `weight_decay_loss`. The trainer adds it to the loss; under a strategy, to the
per-replica loss as `tf.nn.scale_regularization_loss(weight_decay_loss(...))`.
For adamw the decay is decoupled instead and `weight_decay_loss` returns 0 (T2T added
both; t2t does not decay twice).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from t2t.hparams.hparams import HParams

_ALIASES = {
    "adam": "adam",
    "true_adam": "adam",
    "lazy_adam": "adam",
    # T2T's MultistepAdam: Adam over optimizer_multistep_accumulate_steps micro-batches,
    # which t2t accumulates for every optimizer (t2t.trainer.accumulation).
    "multistepadam": "adam",
    "multistep_adam": "adam",
    "adamw": "adamw",
    "adam_w": "adamw",
    "sgd": "sgd",
    "momentum": "momentum",
    "adafactor": "adafactor",
}
OPTIMIZERS = ("adam", "adamw", "adafactor", "sgd", "momentum")


def optimizer_name(name: str) -> str:
    """Canonical optimizer name for a T2T spelling: "Adam" -> "adam", "adam_w" -> "adamw"."""
    key = str(name).strip().lower()
    if key not in _ALIASES:
        raise ValueError(
            f"Unknown optimizer {name!r}: hparams.optimizer must be one of "
            f"{', '.join(OPTIMIZERS)} (any case; aliases: true_adam, adam_w, MultistepAdam)."
        )
    return _ALIASES[key]


# --------------------------------------------------------------------------- clipping
def clip_gradients(
    grads: Sequence[Any], clip_norm: float, *, loss_scale: Any = None
) -> tuple[list[Any], tf.Tensor]:
    """Clips `grads` so that their global L2 norm is at most `clip_norm` (0: no clip).

    Returns (grads, global norm before clipping: float32 scalar, the same on every
    replica; without clipping (clip_norm 0) the norm of this replica's part only). Inside `strategy.run` with several replicas, `grads` are this replica's
    parts of a sum (Keras' apply_gradients sums them): the norm is that of the sum,
    found with one extra all-reduce, and every part is scaled by the same factor, so
    the sum is clipped exactly. With one replica no communication happens.

    loss_scale: for gradients of a scaled loss (`LossScaleOptimizer.scale_loss`), the
    scale (`optimizer.dynamic_scale`): `clip_norm` and the returned norm are then in
    unscaled units. A non-finite norm makes all gradients NaN (tf.clip_by_global_norm),
    which a LossScaleOptimizer detects and skips.
    """
    grads = list(grads)
    present = [g for g in grads if g is not None]
    ctx = tf.distribute.get_replica_context()
    # Without clipping the norm is only reported: this replica's part is enough, and
    # skipping the extra all-reduce keeps multi-replica steps as cheap as possible.
    if clip_norm and ctx is not None and ctx.num_replicas_in_sync > 1:
        present = ctx.all_reduce(tf.distribute.ReduceOp.SUM, present)
    norm = tf.linalg.global_norm(present)
    scale = 1.0
    if loss_scale is not None:
        if isinstance(loss_scale, keras.Variable):
            loss_scale = loss_scale.value
        scale = tf.cast(loss_scale, norm.dtype)
    if clip_norm:
        grads, _ = tf.clip_by_global_norm(grads, clip_norm * scale, use_norm=norm)
    return grads, norm / scale


def _rms(x: tf.Tensor) -> tf.Tensor:
    return tf.sqrt(tf.reduce_mean(tf.square(x)))


@keras.saving.register_keras_serializable(package="t2t")
class Adafactor(keras.optimizers.Adafactor):
    """Tensor2Tensor's AdafactorOptimizer on top of keras.optimizers.Adafactor.

    Keras' Adafactor always factors, always multiplies by the parameter scale, caps the
    step at 1/sqrt(t), has no momentum, and keeps a full-size second moment even when
    factoring. This subclass keeps Keras' arguments and config but updates like T2T:

    hparam (T2T)                                   -> argument here
    optimizer_adafactor_beta1                      -> beta_1 (momentum of the update; 0 = none)
    optimizer_adafactor_beta2                      -> beta_2 (decay_type "adam" only)
    optimizer_adafactor_decay_type ("pow"/"adam")  -> decay_type
    optimizer_adafactor_memory_exponent            -> beta_2_decay = -exponent (Keras' name)
    optimizer_adafactor_clipping_threshold         -> clip_threshold (None/0: no clipping)
    optimizer_adafactor_factored                   -> factored (rank >= 2, last two dims)
    optimizer_adafactor_multiply_by_parameter_scale-> multiply_by_parameter_scale
    epsilon1 / epsilon2 (T2T constants)            -> epsilon_1=1e-30 / epsilon_2=1e-3

    With t = iterations + 1: decay = 1 - t**beta_2_decay ("pow") or
    beta_2 * (1 - beta_2**(t-1)) / (1 - beta_2**t) ("adam"); the learning rate is used
    as given (relative_step is off: the schedule supplies T2T's rsqrt decay).
    """

    def __init__(
        self,
        learning_rate: Any = 0.001,
        beta_1: float = 0.0,
        beta_2: float = 0.999,
        decay_type: str = "pow",
        beta_2_decay: float = -0.8,
        epsilon_1: float = 1e-30,
        epsilon_2: float = 1e-3,
        clip_threshold: float | None = 1.0,
        factored: bool = True,
        multiply_by_parameter_scale: bool = True,
        **kwargs: Any,
    ):
        if decay_type not in ("pow", "adam"):
            raise ValueError(f"Unknown adafactor decay_type {decay_type!r}: use 'pow' or 'adam'.")
        kwargs.pop("relative_step", None)
        super().__init__(
            learning_rate=learning_rate,
            beta_2_decay=beta_2_decay,
            epsilon_1=epsilon_1,
            epsilon_2=epsilon_2,
            clip_threshold=clip_threshold,
            relative_step=False,
            **kwargs,
        )
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.decay_type = decay_type
        self.factored = bool(factored)
        self.multiply_by_parameter_scale = bool(multiply_by_parameter_scale)

    def _is_factored(self, var: Any) -> bool:
        return self.factored and len(var.shape) >= 2

    def _slot(self, shape: tuple[int, ...], var: Any, kind: str) -> Any:
        name = f"{kind}_{getattr(var, 'path', var.name)}".replace("/", "_")
        return self.add_variable(shape, dtype="float32", name=name)

    def build(self, var_list: list[Any]) -> None:
        if self.built:
            return
        keras.optimizers.Optimizer.build(self, var_list)  # skip Keras Adafactor's slots
        self._m, self._vr, self._vc, self._v = [], [], [], []
        for var in var_list:
            skip = self._overwrite_variable_with_gradient(var)
            self._m.append(
                self.add_variable_from_reference(var, name="momentum")
                if self.beta_1 and not skip
                else None
            )
            if not skip and self._is_factored(var):
                shape = tuple(var.shape)
                self._vr.append(self._slot(shape[:-1], var, "vr"))
                self._vc.append(self._slot(shape[:-2] + shape[-1:], var, "vc"))
                self._v.append(None)
            else:
                self._vr.append(None)
                self._vc.append(None)
                self._v.append(None if skip else self._slot(tuple(var.shape), var, "v"))

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        index = self._get_variable_index(variable)
        grad = tf.cast(tf.convert_to_tensor(gradient), tf.float32)
        t = tf.cast(self.iterations + 1, tf.float32)
        if self.decay_type == "adam":
            b2 = self.beta_2
            decay = b2 * (1.0 - tf.pow(b2, t - 1.0)) / (1.0 - tf.pow(b2, t))
        else:
            decay = 1.0 - tf.pow(t, float(self.beta_2_decay))
        mixing = 1.0 - decay
        grad_sq = tf.square(grad) + self.epsilon_1
        if self._vr[index] is not None:
            vr, vc = self._vr[index], self._vc[index]
            new_vr = decay * vr + mixing * tf.reduce_mean(grad_sq, -1)
            new_vc = decay * vc + mixing * tf.reduce_mean(grad_sq, -2)
            self.assign(vr, new_vr)
            self.assign(vc, new_vc)
            r_factor = tf.math.rsqrt(new_vr / tf.reduce_mean(new_vr, -1, keepdims=True))
            c_factor = tf.math.rsqrt(new_vc)
            x = grad * tf.expand_dims(r_factor, -1) * tf.expand_dims(c_factor, -2)
        else:
            v = self._v[index]
            new_v = decay * v + mixing * grad_sq
            self.assign(v, new_v)
            x = grad * tf.math.rsqrt(new_v)
        if self.clip_threshold:
            x = x / tf.maximum(1.0, _rms(x) / self.clip_threshold)
        old = tf.cast(tf.convert_to_tensor(variable), tf.float32)
        scale = tf.cast(learning_rate, tf.float32)
        if self.multiply_by_parameter_scale:
            scale = scale * tf.maximum(_rms(old), self.epsilon_2)
        update = scale * x
        if self.beta_1:
            m = self._m[index]
            update = self.beta_1 * m + (1.0 - self.beta_1) * update
            self.assign(m, update)
        self.assign_sub(variable, update)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            decay_type=self.decay_type,
            factored=self.factored,
            multiply_by_parameter_scale=self.multiply_by_parameter_scale,
        )
        return config


# ------------------------------------------------------------------------- factories
def create_optimizer(
    hparams: HParams, learning_rate: Any, *, mixed_precision: str | None = None
) -> keras.optimizers.Optimizer:
    """The optimizer `hparams.optimizer` with `learning_rate` (float, schedule, callable).

    mixed_precision: None/"float32"/"bfloat16"/"mixed_bfloat16" return the optimizer
    as is; "float16"/"mixed_float16" wrap it in `keras.optimizers.LossScaleOptimizer`
    (initial scale `mixed_precision_optimizer_init_loss_scale`, default 2**15; doubled
    after 2000 finite steps, as T2T's exponential loss scaler).
    """
    name = optimizer_name(hparams.optimizer)
    common: dict[str, Any] = {"learning_rate": learning_rate}
    if name in ("adam", "adamw"):
        adam_args = {
            "beta_1": hparams.optimizer_adam_beta1,
            "beta_2": hparams.optimizer_adam_beta2,
            "epsilon": hparams.optimizer_adam_epsilon,
        }
        if name == "adam":
            optimizer: keras.optimizers.Optimizer = keras.optimizers.Adam(**adam_args, **common)
        else:
            optimizer = keras.optimizers.AdamW(
                weight_decay=float(hparams.weight_decay or 0.0), **adam_args, **common
            )
            optimizer.exclude_from_weight_decay(var_names=["bias"])
    elif name == "sgd":
        optimizer = keras.optimizers.SGD(**common)
    elif name == "momentum":
        optimizer = keras.optimizers.SGD(
            momentum=hparams.optimizer_momentum_momentum,
            nesterov=bool(hparams.optimizer_momentum_nesterov),
            **common,
        )
    else:
        optimizer = Adafactor(
            beta_1=hparams.optimizer_adafactor_beta1,
            beta_2=hparams.optimizer_adafactor_beta2,
            decay_type=hparams.optimizer_adafactor_decay_type,
            beta_2_decay=-float(hparams.optimizer_adafactor_memory_exponent),
            clip_threshold=hparams.optimizer_adafactor_clipping_threshold,
            factored=bool(hparams.optimizer_adafactor_factored),
            multiply_by_parameter_scale=bool(
                hparams.optimizer_adafactor_multiply_by_parameter_scale
            ),
            **common,
        )
    if mixed_precision in (None, "float32", "bfloat16", "mixed_bfloat16"):
        return optimizer
    if mixed_precision in ("float16", "mixed_float16"):
        return keras.optimizers.LossScaleOptimizer(
            optimizer,
            initial_scale=float(hparams.mixed_precision_optimizer_init_loss_scale),
            dynamic_growth_steps=2000,
        )
    raise ValueError(
        f"Unknown mixed_precision {mixed_precision!r}: use None, 'float32', 'float16', "
        "'mixed_float16', 'bfloat16' or 'mixed_bfloat16'."
    )


# ----------------------------------------------------------------------- weight decay
def _is_bias(variable: Any) -> bool:
    name = str(getattr(variable, "path", None) or variable.name).split(":")[0]
    return len(variable.shape) == 1 and name.endswith("bias")


def weight_decay_loss(variables: Sequence[Any], hparams: HParams) -> tf.Tensor:
    """T2T's L2 weight decay: weight_decay * sum(||v||^2 / 2), biases skipped.

    A float32 scalar; 0 when weight_decay is 0 or the optimizer is adamw (decoupled).
    Not divided by the number of replicas: inside `strategy.run` add
    `tf.nn.scale_regularization_loss(weight_decay_loss(...))` to the replica's loss.
    """
    rate = float(hparams.weight_decay or 0.0)
    if not rate or optimizer_name(hparams.optimizer) == "adamw":
        return tf.constant(0.0)
    terms = []
    for v in variables:
        if _is_bias(v):
            continue
        value = v.value if isinstance(v, keras.Variable) else v
        terms.append(tf.nn.l2_loss(tf.cast(value, tf.float32)))
    if not terms:
        return tf.constant(0.0)
    return tf.add_n(terms) * rate


# model -> its trainable parts, made once (Keras would track a list set on the model).
_PARTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def trainable_parts(model: Any) -> list[Any]:
    """The variables the optimizer updates: the model's trainable variables, except that
    one split over parameter servers (a tf ShardedVariable behind its Keras variable,
    see --ps_min_shard_bytes) is replaced by a Keras variable per shard. Gradients flow
    to the shards the forward pass read, and each shard gets its own optimizer slots on
    its own ps task."""
    parts = _PARTS.get(model)
    if parts is None:
        from tensorflow.python.distribute import sharded_variable

        parts = []
        for variable in model.trainable_variables:
            value = variable.value  # the TensorFlow variable behind the Keras one
            if isinstance(value, sharded_variable.ShardedVariable):
                parts.extend(keras.Variable(shard, name=f"{variable.name}_part_{i}")
                             for i, shard in enumerate(value.variables))
            else:
                parts.append(variable)
        _PARTS[model] = parts
    return parts
