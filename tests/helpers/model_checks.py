"""Checks shared by the model tests: the `mixed_bfloat16` fixture, XLA against eager, and
one training step under a 2-CPU MirroredStrategy in a fresh process.

A test module uses the fixture by importing it
(`from tests.helpers.model_checks import mixed_bfloat16  # noqa: F401`) and marking its
tests `@pytest.mark.usefixtures("mixed_bfloat16")` (as a test's argument, the name would
redefine the import: ruff's F811).

The mirrored step runs in a child process because the two logical CPUs must be set up
before TensorFlow first touches its devices. `mirrored_step_script` assembles the child's
script from a test's own parts, `start_mirrored_step` starts it (early, if its seconds
should overlap other tests) and `mirrored_step_result` waits for it and parses what it
printed: per model, one line `RESULT name replicas finite changed total same`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ numerics
@pytest.fixture
def mixed_bfloat16():
    """Keras' global policy "mixed_bfloat16" for the test; float32 again afterwards."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")


def assert_xla_forward_matches_eager(model, features, atol: float = 1e-4, rtol: float = 1e-7):
    """The XLA-compiled inference forward pass gives the eager pass's logits."""
    eager = model(features, training=False)[0]

    @tf.function(jit_compile=True)
    def forward(features):
        return model(features, training=False)[0]

    np.testing.assert_allclose(forward(features).numpy(), eager.numpy(), rtol=rtol, atol=atol)


# ------------------------------------------------- one mirrored training step
_HEAD = """\
import os
import numpy as np, tensorflow as tf, keras
from t2t.trainer import strategy as s
strategy = s.create_strategy(s.StrategyConfig(cpu_devices=2))
"""

# The model is built and the optimizer made in the strategy's scope; `replica_step` then
# runs on both replicas in one tf.function. `changed` counts the trainable variables the
# step moved; `same`: each variable's two replicas are equal afterwards.
_RUN = """\


def _one_step(name, make_model):
    with strategy.scope():
        model = make_model()
        model.build_for(features)
        optimizer = {optimizer}
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
    before = [v.numpy().copy() for v in model.trainable_variables]
{step}
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(4)
    batch = next(iter(strategy.experimental_distribute_dataset(dataset)))
    out = tf.function(lambda b: strategy.run(replica_step, args=(b,)))(batch)
    loss = out[0] if isinstance(out, tuple) else out
    loss = float(strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None))
    changed = sum(not np.allclose(b, v.numpy()) for b, v in zip(before, model.trainable_variables))
    replicas = [strategy.experimental_local_results(v.value) for v in model.trainable_variables]
    same = all(np.array_equal(r[0].numpy(), r[1].numpy()) for r in replicas)
    print("RESULT", name, strategy.num_replicas_in_sync, np.isfinite(loss), changed, len(before),
          same, flush=True)


"""

# The default replica step: `loss` (an expression of the model's `losses`, normalised by
# the global batch) and its gradients, every one of which must exist.
_DEFAULT_STEP = """
    def replica_step(features):
        with tf.GradientTape() as tape:
            losses = model(features, training=True)[1]
            loss = {loss}
        grads = tape.gradient(loss, model.trainable_variables)
        assert all(g is not None for g in grads), [
            v.path for g, v in zip(grads, model.trainable_variables) if g is None]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
"""


def mirrored_step_script(setup: str, models: dict[str, str], *,
                         optimizer: str = "keras.optimizers.Adam(1e-2)",
                         loss: str | None = None, step: str | None = None) -> str:
    """The child's script: one training step of each model on a 2-CPU MirroredStrategy.

    setup: code run once the strategy exists (imports, hparams, ...); it defines
        `features`, the global batch of 4 examples.
    models: RESULT name -> expression that makes the model (evaluated in the strategy's
        scope, after `setup`); each is built on `features`.
    optimizer: expression of the optimizer (it may read `model`); built if it is not.
    loss: the default replica step's loss, an expression of `losses` (the model's
        {name: (numerator, denominator)}) normalised by the global batch.
    step: instead of the default, an expression giving the replica step function (it
        may read `model` and `optimizer`), returning the loss or (loss, ...).
    """
    if (loss is None) == (step is None):
        raise ValueError("give either `loss` (for the default step) or `step`")
    step_code = (_DEFAULT_STEP.format(loss=loss) if step is None
                 else f"    replica_step = {step}\n")
    runs = "".join(f"_one_step({name!r}, lambda: {expr})\n" for name, expr in models.items())
    return (_HEAD + textwrap.dedent(setup).strip() + "\n"
            + _RUN.format(optimizer=optimizer, step=step_code)
            + runs + "os._exit(0)\n")


class MirroredStep(subprocess.Popen):
    """The child running a mirrored-step script; its stdout and stderr go to temporary
    files (no pipe to fill while it runs unread). As a context manager it is killed on
    exit if still running, and its files are closed."""

    def __init__(self, script: str):
        self.out_file = tempfile.TemporaryFile(mode="w+")
        self.err_file = tempfile.TemporaryFile(mode="w+")
        super().__init__([sys.executable, "-c", script], stdout=self.out_file,
                         stderr=self.err_file, text=True, cwd=REPO)

    def outputs(self) -> tuple[str, str]:
        """(stdout, stderr) so far."""
        texts = []
        for file in (self.out_file, self.err_file):
            file.seek(0)
            texts.append(file.read())
        return texts[0], texts[1]

    def __exit__(self, *exc_info):
        if self.poll() is None:
            self.kill()
        self.wait()
        self.out_file.close()
        self.err_file.close()
        return False


def start_mirrored_step(script: str) -> MirroredStep:
    """Starts the script in a fresh Python (a `subprocess.Popen`); see mirrored_step_result."""
    return MirroredStep(script)


def mirrored_step_result(proc_or_script: MirroredStep | str, timeout: float = 180
                         ) -> dict[str, dict]:
    """Waits for the child (starting it first if given a script) and returns, per RESULT
    name, {"replicas": int, "finite": bool, "changed": int, "total": int, "same": bool}.

    Fails, with the tail of the child's stderr, if it timed out, failed, printed no
    RESULT line or warned that some variable had no gradient."""
    proc = start_mirrored_step(proc_or_script) if isinstance(proc_or_script, str) else proc_or_script
    with proc:
        try:
            proc.wait(timeout=timeout)
            problem = None
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            problem = f"timed out after {timeout} s"
        stdout, stderr = proc.outputs()
    results = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            _, name, replicas, finite, changed, total, same = line.split()
            results[name] = {"replicas": int(replicas), "finite": finite == "True",
                             "changed": int(changed), "total": int(total), "same": same == "True"}
    tail = f"exit status {proc.returncode}\n{stdout[-1000:]}\n{stderr[-3000:]}"
    assert problem is None and proc.returncode == 0 and results, (
        f"{problem or 'no RESULT line, or it failed'}; {tail}")
    assert "Gradients do not exist" not in stderr, f"a variable got no gradient; {tail}"
    return results


# ------------------------------------------------- sequence-to-sequence decoder checks
def seq2seq_logits(model, inputs, targets, training: bool = False) -> np.ndarray:
    """The model's logits [B, T, V] for inputs [B, S] and targets [B, T]."""
    return model({"inputs": inputs, "targets": targets}, training=training)[0].numpy()


def assert_decoder_is_causal(model, inputs: tf.Tensor, targets: tf.Tensor) -> None:
    """Changing target token t (2 <-> 3, 0/1 -> 2) changes no logit at positions <= t
    and does change position t + 1: targets [B, T] (ids 0-3), inputs [B, S]."""
    batch, length = targets.shape
    # Row block t of one batch holds the targets with token t changed.
    changed = np.tile(targets.numpy(), [length, 1])
    for t in range(length):
        rows = changed[batch * t: batch * (t + 1), t]
        changed[batch * t: batch * (t + 1), t] = np.where(rows > 1, 5 - rows, 2)
    tiled_inputs = tf.tile(inputs, [length, 1])
    base = seq2seq_logits(model, tiled_inputs, tf.tile(targets, [length, 1]))
    diff = np.abs(seq2seq_logits(model, tiled_inputs, tf.constant(changed)) - base).max(-1)
    for t in range(length):
        block = diff[batch * t: batch * (t + 1)]  # [B, T]
        assert np.all(block[:, : t + 1] == 0.0), (t, block)
        if t + 1 < length:
            assert np.all(block[:, t + 1] > 0.0), (t, block)


def losses_on_a_fixed_batch(model, features: dict[str, tf.Tensor], steps: int,
                            learning_rate: float = 0.01) -> list[float]:
    """The training loss of each of `steps` Adam steps on one fixed batch."""
    model.build_for(features)
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build(model.trainable_variables)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            numerator, denominator = model(features, training=True)[1]["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return [float(train_step()) for _ in range(steps)]


def assert_well_formed(ids: np.ndarray, vocab_size: int, eos_id: int = 1) -> None:
    """Ids in the vocabulary, and only padding after the first EOS."""
    assert ids.min() >= 0 and ids.max() < vocab_size
    for row in ids.reshape(-1, ids.shape[-1]).tolist():
        if eos_id in row:
            assert not any(row[row.index(eos_id) + 1:]), row


def assert_teacher_forced_argmax(model, inputs: tf.Tensor, decoded: np.ndarray,
                                 eos_id: int = 1) -> None:
    """Fed back as targets, greedy decodes [B, L] are the argmax at every position up to
    and including their EOS."""
    argmax = seq2seq_logits(model, inputs, tf.constant(decoded)).argmax(-1)
    for row in range(decoded.shape[0]):
        ids = decoded[row].tolist()
        stop = ids.index(eos_id) + 1 if eos_id in ids else len(ids)
        np.testing.assert_array_equal(argmax[row, :stop], decoded[row, :stop])


def assert_beams_sorted_and_scored(model, inputs: tf.Tensor, vocab_size: int,
                                   decode_length: int = 6, eos_id: int = 1) -> None:
    """Beam search (beam 3, top 2, alpha 0) over inputs [B, S]: well-formed beams [B, 2, L]
    sorted by score, the best one scored by its teacher-forced log-probability."""
    from t2t.decoding import infer as infer_lib  # the decoding package, for model tests only

    out = infer_lib.infer(model, {"inputs": inputs}, decode_length=decode_length,
                          beam_size=3, top_beams=2)
    ids, scores = out["outputs"].numpy(), out["scores"].numpy()
    batch = inputs.shape[0]
    assert ids.shape == (batch, 2, decode_length) and scores.shape == (batch, 2)
    assert_well_formed(ids, vocab_size, eos_id)
    assert np.all(scores[:, 0] >= scores[:, 1]) and np.all(np.isfinite(scores))
    best = ids[:, 0]
    log_probs = tf.nn.log_softmax(seq2seq_logits(model, inputs, tf.constant(best))).numpy()
    for row in range(batch):
        tokens = best[row].tolist()
        stop = tokens.index(eos_id) + 1 if eos_id in tokens else len(tokens)
        expected = sum(log_probs[row, i, tokens[i]] for i in range(stop))
        np.testing.assert_allclose(scores[row, 0], expected, rtol=1e-4, atol=1e-4)


def push_down_pad_and_eos(model, eos_logit: float = -0.4) -> None:
    """Makes an untrained transformer_test (shared embedding) decode real tokens, not an
    immediate EOS: the logits of PAD and EOS pushed down through the final norm's bias
    and the shared embedding (EOS by `eos_logit`: -0.4 still ends long outputs)."""
    from t2t.models import variable_names

    named = variable_names.named_variables(model)
    embedding = named["feature_modalities.inputs.embedding"].numpy()
    embedding[:, 0] = 0.0
    embedding[0, 0], embedding[1, 0] = -3.0, eos_logit
    named["feature_modalities.inputs.embedding"].assign(embedding)
    beta = np.zeros(named["decoder.final.norm.beta"].shape, np.float32)
    beta[0] = 3.0
    named["decoder.final.norm.beta"].assign(beta)
