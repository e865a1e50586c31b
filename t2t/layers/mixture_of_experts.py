"""A sparsely-gated mixture-of-experts layer (Shazeer et al., 2017).

As in T2T's `expert_utils.local_moe` / `distributed_moe` with `noisy_top_k_gating` and
`ffn_expert_fn`: a gate picks k of E experts per token from
    logits = x W_gate (+ N(0, 1) * (softplus(x W_noise) + noise_epsilon) in training)
and weighs them with a softmax over the k chosen logits; each expert is a
dense-relu-dense network without biases (T2T's ffn_expert_fn, whose hidden layers are
scaled by (size / input size)^-0.5); the output is the gate-weighted sum of the chosen
experts' outputs. The load-balancing loss is
    loss_coef * (cv_squared(importance) + cv_squared(load)),
importance = the gates summed over tokens, load = the (smooth, in training) number of
tokens per expert, cv_squared the squared coefficient of variation.

Shapes: N tokens (all leading axes flattened), H hidden size, E experts, F expert
hidden size.

Layout for scaling out: the experts' weights are stacked, one [E, H, F] (and
[E, F, H]) variable per expert layer, not a Python list of layers, and every expert
runs as one batched matmul over the leading E axis; expert parallelism (e.g. a DTensor
layout sharding axis 0 of those variables and of the dispatched [E, N, H] tensor) can
shard them without changing the variables.

Differences from Tensor2Tensor:
- dispatch and combine are dense one-hot einsums: every expert receives an [N, H]
  buffer in which tokens not routed to it are zero, so the experts' compute is E/k
  times that of T2T's SparseDispatcher (gather/split per expert). Fine at the sizes
  t2t trains on CPU; a capacity-limited [E, C, H] dispatch is the step to take for
  large E. There is no expert capacity (no token is dropped), as in T2T's local_moe.
- at evaluation (no noise) `load` counts the tokens per expert; T2T evaluates its
  smooth estimate with zero noise, which is the same count except for exact ties.
- no per-device expert placement (T2T's expert_devices / ps_devices).
"""

from __future__ import annotations

import math
from typing import Any

import keras
import tensorflow as tf

from t2t.layers import common


def cv_squared(x: tf.Tensor) -> tf.Tensor:
    """The squared coefficient of variation (variance / mean^2) of the values of `x`;
    0 for equal values. Epsilons as in T2T."""
    epsilon = 1e-10
    x = tf.cast(x, tf.float32)
    size = tf.cast(tf.size(x), tf.float32) + epsilon
    mean = tf.reduce_sum(x) / size
    variance = tf.reduce_sum(tf.square(x - mean)) / size
    return variance / (tf.square(mean) + epsilon)


def _normal_cdf(x: tf.Tensor, stddev: tf.Tensor) -> tf.Tensor:
    return 0.5 * (1.0 + tf.math.erf(x / (math.sqrt(2) * stddev + 1e-20)))


def prob_in_top_k(clean_logits: tf.Tensor, noisy_logits: tf.Tensor, noise_stddev: tf.Tensor,
                  noisy_top_values: tf.Tensor, k: int) -> tf.Tensor:
    """[N, E] probability that each expert is in the top k under fresh noise (T2T's
    _prob_in_top_k): differentiable in the clean logits and the noise scale.

    noisy_top_values [N, k + 1]: the k + 1 largest noisy logits, in decreasing order."""
    threshold_if_in = noisy_top_values[:, k:k + 1]  # the value an expert must beat when in
    threshold_if_out = noisy_top_values[:, k - 1:k]
    is_in = noisy_logits > threshold_if_in
    prob_if_in = _normal_cdf(clean_logits - threshold_if_in, noise_stddev)
    prob_if_out = _normal_cdf(clean_logits - threshold_if_out, noise_stddev)
    return tf.where(is_in, prob_if_in, prob_if_out)


def noisy_top_k_gating(x: tf.Tensor, w_gate: tf.Tensor, w_noise: tf.Tensor, k: int,
                       noise: tf.Tensor | None = None, noise_epsilon: float = 1e-2
                       ) -> tuple[tf.Tensor, tf.Tensor]:
    """(gates [N, E], load [E]) for tokens x [N, H] (float32).

    `noise` [N, E] (standard normal draws, training) perturbs the logits by
    noise * (softplus(x w_noise) + noise_epsilon); None gates on the clean logits.
    Each row of `gates` has k non-zero entries, a softmax over the k largest logits."""
    num_experts = w_gate.shape[-1]
    if not 1 <= k <= num_experts:
        raise ValueError(f"moe k={k} must be between 1 and the number of experts ({num_experts}).")
    clean_logits = tf.matmul(x, w_gate)
    logits, noise_stddev = clean_logits, None
    if noise is not None:
        noise_stddev = tf.nn.softplus(tf.matmul(x, w_noise)) + noise_epsilon
        logits = clean_logits + noise * noise_stddev
    top_values, top_indices = tf.math.top_k(logits, k=min(k + 1, num_experts))
    top_k_gates = tf.nn.softmax(top_values[:, :k], axis=-1)  # [N, k]
    one_hot = tf.one_hot(top_indices[:, :k], num_experts, dtype=top_k_gates.dtype)  # [N, k, E]
    gates = tf.einsum("nk,nke->ne", top_k_gates, one_hot)
    if noise_stddev is not None and k < num_experts:
        load = tf.reduce_sum(prob_in_top_k(clean_logits, logits, noise_stddev, top_values, k), 0)
    else:
        load = tf.reduce_sum(tf.cast(gates > 0, gates.dtype), 0)
    return gates, load


def load_balancing_loss(gates: tf.Tensor, load: tf.Tensor, loss_coef: float) -> tf.Tensor:
    """loss_coef * (cv_squared(importance) + cv_squared(load)); importance = gates [N, E]
    summed over tokens."""
    return loss_coef * (cv_squared(tf.reduce_sum(gates, 0)) + cv_squared(load))


class _PerExpert(keras.initializers.Initializer):
    """Initializes a stacked [E, ...] kernel as E independent [...] kernels (so that
    fan-in/fan-out scaling sees one expert's shape, not the stack's)."""

    def __init__(self, initializer: Any):
        self.initializer = initializer

    def __call__(self, shape: Any, dtype: Any = None) -> tf.Tensor:
        init = keras.initializers.get(self.initializer)
        return tf.stack([common.clone_initializer(init)(tuple(shape[1:]), dtype=dtype)
                         for _ in range(shape[0])])

    def get_config(self) -> dict[str, Any]:
        return {"initializer": keras.initializers.serialize(keras.initializers.get(self.initializer))}


class MixtureOfExperts(common.Layer):
    """Noisy top-k gated experts: `call(x [..., H], training)` -> (y [..., H], loss []).

    expert_hidden_sizes: each expert's hidden layer sizes (T2T's moe_hidden_sizes).
    Weights: `w_gate`, `w_noise` [H, E] (zeros, as in T2T) and `expert_kernels`, one
    stacked [E, d_in, d_out] kernel per expert layer.
    """

    def __init__(self, hidden_size: int, expert_hidden_sizes: list[int], num_experts: int,
                 k: int = 2, loss_coef: float = 1e-2, noise_epsilon: float = 1e-2,
                 kernel_initializer: Any = "glorot_uniform", seed: int | None = None,
                 name: str | None = None):
        super().__init__(name=name)
        if not 1 <= k <= num_experts:
            raise ValueError(f"moe k={k} must be between 1 and num_experts={num_experts}.")
        self.hidden_size = hidden_size
        self.layer_sizes = [hidden_size, *expert_hidden_sizes, hidden_size]
        self.num_experts, self.k = num_experts, k
        self.loss_coef, self.noise_epsilon = loss_coef, noise_epsilon
        self.expert_initializer = kernel_initializer
        self.noise_seed = keras.random.SeedGenerator(seed)

    def build(self, *args: Any, **kwargs: Any) -> None:
        shape = (self.hidden_size, self.num_experts)
        self.w_gate = self.add_weight(name="w_gate", shape=shape, initializer="zeros")
        self.w_noise = self.add_weight(name="w_noise", shape=shape, initializer="zeros")
        sizes = self.layer_sizes
        self.expert_kernels = [
            self.add_weight(name=f"expert_kernel_{i}", shape=(self.num_experts, sizes[i], sizes[i + 1]),
                            initializer=_PerExpert(self.expert_initializer))
            for i in range(len(sizes) - 1)
        ]
        super().build(*args, **kwargs)

    def gate(self, x: tf.Tensor, training: bool) -> tuple[tf.Tensor, tf.Tensor]:
        """(gates [N, E], load [E]) in float32 for tokens x [N, H]; noisy in training."""
        x = tf.cast(x, tf.float32)
        noise = None
        if training:
            shape = (tf.shape(x)[0], self.num_experts)
            noise = keras.random.normal(shape, seed=self.noise_seed, dtype="float32")
        return noisy_top_k_gating(x, tf.cast(self.w_gate, tf.float32), tf.cast(self.w_noise, tf.float32),
                                  self.k, noise, self.noise_epsilon)

    def experts(self, expert_inputs: tf.Tensor) -> tf.Tensor:
        """Every expert on its own inputs: [E, N, H] -> [E, N, H] (T2T's ffn_expert_fn)."""
        h = expert_inputs
        last = len(self.expert_kernels) - 1
        for i, kernel in enumerate(self.expert_kernels):
            h = tf.matmul(h, tf.cast(kernel, h.dtype))
            if i < last:
                h = tf.nn.relu(h)
            if self.layer_sizes[i] != self.hidden_size:
                h *= tf.cast((self.layer_sizes[i] / self.hidden_size) ** -0.5, h.dtype)
        return h

    def dispatch_and_combine(self, x: tf.Tensor, gates: tf.Tensor) -> tf.Tensor:
        """sum_e gates[n, e] * expert_e(x[n]) for x [N, H], gates [N, E]: [N, H].

        Dense one-hot dispatch: expert e gets [N, H] with the tokens it was not
        chosen for zeroed (see the module docstring)."""
        gates = tf.cast(gates, x.dtype)
        dispatch = tf.cast(gates > 0, x.dtype)
        expert_inputs = tf.einsum("ne,nh->enh", dispatch, x)
        return tf.einsum("ne,enh->nh", gates, self.experts(expert_inputs))

    def call(self, x: tf.Tensor, training: bool | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        shape = tf.shape(x)
        flat = tf.reshape(x, [-1, self.hidden_size])
        gates, load = self.gate(flat, bool(training))
        y = self.dispatch_and_combine(flat, gates)
        return tf.reshape(y, shape), load_balancing_loss(gates, load, self.loss_coef)
