"""A fresh process for the mesh tests (logical devices are fixed when TensorFlow starts).

    python -m tests.parallel.mesh_run train DATA RUN STEPS ['MESH_SHAPE|LAYOUT' | dp:N]
                                     [--set-dropout]
        Trains transformer_tiny (HPARAMS, seed 1, deterministic input; with
        --set-dropout the set's own dropout rates, SET_DROPOUT_HPARAMS) on
        algorithmic_reverse_binary40_test to STEPS in RUN (resuming what is there) on a
        mesh, on N-way MirroredStrategy (dp:N) or on one device; writes RUN/restored-S.npz
        and RUN/trained-S.npz (weights and optimizer variables as restored at step S, and
        at the end; -workerI before .npz in a process of a cluster) and
        prints one JSON line {"restored_step", "step", "losses"}.
        Under t2t-launch --num_workers=N (a TF_CONFIG), a mesh spans the N processes.
    python -m tests.parallel.mesh_run masks
        On a batch:2;model:2 mesh, the 16-bit dropout kernel (t2t.layers.common) on a
        batch-split and on a last-axis-split [8, 64] tensor: prints {LAYOUT: [the four
        devices' keep masks]}.
    python -m tests.parallel.mesh_run equality DATA OUT STEPS MESH_SHAPE LAYOUT
        The same STEPS on the mesh and on one device from the same start: prints
        {"mesh_losses", "single_losses", "max_weight_difference", "max_weight"}.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

# transformer_tiny's own optimizer (Adam) and schedule, dropout off, a small batch.
HPARAMS = ("layer_prepostprocess_dropout=0,attention_dropout=0,relu_dropout=0,"
           "symbol_dropout=0,batch_size=1024,learning_rate_warmup_steps=400")
# The same with transformer_tiny's own dropout (0.1 on every sublayer, attention, relu).
SET_DROPOUT_HPARAMS = "batch_size=1024,learning_rate_warmup_steps=400"


def _trainer(data_dir: str, output_dir: str, steps: int, mesh: str = "", layout: str = "",
             cpu_devices: int = 0, set_dropout: bool = False):
    from t2t import registry
    from t2t.config import InputConfig, RuntimeConfig, TrainerConfig
    from t2t.hparams.basic import create_hparams
    from t2t.trainer.trainer import Trainer

    problem = registry.problem("algorithmic_reverse_binary40_test")
    extra = f",mesh_shape={mesh},layout={layout}" if mesh else ""
    hparams = create_hparams("transformer_tiny",
                             (SET_DROPOUT_HPARAMS if set_dropout else HPARAMS) + extra)
    config = TrainerConfig(train_steps=steps, save_checkpoints_steps=10_000,
                           local_eval_frequency=10_000, log_every_steps=10_000,
                           decode_summaries=0)
    runtime = RuntimeConfig(random_seed=1, deterministic=True, cpu_devices=cpu_devices)
    return Trainer(problem, "transformer", hparams, data_dir, output_dir, config, runtime,
                   InputConfig(), run_info={"hparams_set": "transformer_tiny"})


def values(trainer) -> dict[str, np.ndarray]:
    """Every weight and optimizer variable by its index, on the host."""
    from t2t.parallel import sharding

    strategy = trainer.runtime.strategy

    def host(v):
        if trainer.runtime.mesh is not None:
            return sharding.fetch(v.value)
        return np.asarray(strategy.experimental_local_results(v.value)[0])

    model = {f"model/{i}": host(v) for i, v in enumerate(trainer.model.variables)}
    slots = {f"optimizer/{i}": host(v) for i, v in enumerate(trainer.optimizer.variables)}
    return {**model, **slots}


def train(data_dir: str, output_dir: str, steps: int, where: str = "",
          set_dropout: bool = False) -> None:
    mesh = layout = ""
    cpu_devices = 0
    if where.startswith("dp:"):
        cpu_devices = int(where[3:])
    elif where:
        mesh, layout = where.split("|")
    trainer = _trainer(data_dir, output_dir, steps, mesh, layout, cpu_devices, set_dropout)
    task_type, index = trainer.runtime.task
    client = f"-{task_type}{index}" if task_type else ""  # one file per process
    restored = trainer.step
    np.savez(os.path.join(output_dir, f"restored-{restored}{client}.npz"), **values(trainer))
    trainer.train()
    np.savez(os.path.join(output_dir, f"trained-{trainer.step}{client}.npz"), **values(trainer))
    print(json.dumps({"restored_step": restored, "step": trainer.step,
                      "losses": [loss for _, loss in trainer.loss_history]}))


def equality(data_dir: str, out: str, steps: int, mesh: str, layout: str) -> None:
    # The mesh first: it splits the CPU, which must happen before TensorFlow uses it.
    on_mesh = _trainer(data_dir, os.path.join(out, "mesh"), steps, mesh, layout)
    on_mesh.train()
    single = _trainer(data_dir, os.path.join(out, "single"), steps)
    single.train()
    a, b = values(on_mesh), values(single)
    assert a.keys() == b.keys()
    diffs = [float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) for k in a if a[k].size]
    print(json.dumps({"mesh_losses": [v for _, v in on_mesh.loss_history],
                      "single_losses": [v for _, v in single.loss_history],
                      "max_weight_difference": max(diffs),
                      "max_weight": max(float(np.max(np.abs(v))) for v in b.values() if v.size),
                      "variables": len(a)}))


def masks() -> None:
    import tensorflow as tf
    from tensorflow.experimental import dtensor

    from t2t.layers import common
    from t2t.parallel import mesh_runtime

    mesh = mesh_runtime.start_mesh("batch:2;model:2", "batch:batch").dmesh

    kernel = tf.function(lambda x, seed: common.dropout_16bit(x, 0.5, seed))
    seed = dtensor.copy_to_mesh(tf.constant([5, 9], tf.int64), dtensor.Layout.replicated(mesh, 1))
    out = {}
    for name, spec in {"batch": ["batch", dtensor.UNSHARDED],
                       "model": [dtensor.UNSHARDED, "model"]}.items():
        x = dtensor.call_with_layout(tf.ones, dtensor.Layout(spec, mesh), shape=[8, 64])
        dropped = kernel(x, seed)
        out[name] = [(part.numpy() != 0).astype(int).tolist() for part in dtensor.unpack(dropped)]
    print(json.dumps(out))


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    set_dropout = "--set-dropout" in args
    args = [a for a in args if a != "--set-dropout"]
    if command == "train":
        train(args[0], args[1], int(args[2]), args[3] if len(args) > 3 else "", set_dropout)
    elif command == "masks":
        masks()
    else:
        equality(args[0], args[1], int(args[2]), args[3], args[4])
