"""The step interface between a model and the decoding algorithms (t2t.decoding).

A model decodes through a step function; greedy decoding, sampling and beam search
drive it, and never the other way round (models do not import decoding):

    state = model.decode_init(features, decode_length)            # or decode_init_cached
    logits, state = model.decode_step(previous_ids, index, state)  # or decode_step_cached

`previous_ids` int32 [N] are the tokens chosen at position index - 1 (ignored at index
0); `logits` float32 [N, V] score position `index`; `state` is a nest of tensors whose
first axis is N (batch, or batch * beam under beam search, which reorders it by
gathering along that axis).

Slot-major caches: a state dict may keep key/value caches under `SLOTS`, which beam
search never reorders. Beam slot j of an example writes position i of its cache at
step i, and beam search keeps `state[ANCESTRY]`, float32 one-hot [N, L, beam]: for each
current hypothesis and past position, the slot whose cache holds it. A cached step
function attends through it, so a reorder moves only [N, L, beam] floats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import tensorflow as tf

SLOTS = "beam_slots"
ANCESTRY = "beam_ancestry"

StepFn = Callable[[tf.Tensor, tf.Tensor, Any], tuple[tf.Tensor, Any]]


@runtime_checkable
class Decodable(Protocol):
    """What decoding needs of a model (T2TModel provides it)."""

    problem_hparams: Any
    has_decode_cache: bool

    def __call__(self, features: dict[str, tf.Tensor], training: bool | None = None) -> Any: ...

    def decode_init(self, features: dict[str, tf.Tensor], decode_length: tf.Tensor) -> Any: ...

    def decode_step(self, previous_ids: tf.Tensor, index: tf.Tensor, state: Any
                    ) -> tuple[tf.Tensor, Any]: ...

    def decode_init_cached(self, features: dict[str, tf.Tensor], decode_length: tf.Tensor
                           ) -> Any: ...

    def decode_step_cached(self, previous_ids: tf.Tensor, index: tf.Tensor, state: Any
                           ) -> tuple[tf.Tensor, Any]: ...
