"""Gradient accumulation (optimizer_multistep_accumulate_steps): N micro-batches per
update train exactly as one batch holding them all, under each strategy's hooks; steps
count updates and a resumed run continues exactly.

`python -m tests.trainer.test_accumulation mirrored` (a fresh process: two logical CPU
devices must be set before TensorFlow starts) prints the MirroredStrategy comparison as
one JSON line.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PROBLEM = "algorithmic_reverse_binary40_test"
# transformer_tiny made smaller, dropout off (the micro-batches must see the same model),
# weight decay and an active gradient clip on (both must come out exact).
HPARAMS = ("hidden_size=32,filter_size=64,num_heads=4,num_hidden_layers=1,"
           "layer_prepostprocess_dropout=0,"
           "attention_dropout=0,relu_dropout=0,symbol_dropout=0,weight_decay=1e-3,"
           "clip_grad_norm=0.5,learning_rate_warmup_steps=10")
# transformer_test through the Trainer, dropout off (a resume is compared exactly).
RUN_HPARAMS = ("batch_size=256,learning_rate_warmup_steps=10,layer_prepostprocess_dropout=0,"
               "attention_dropout=0,relu_dropout=0,optimizer_multistep_accumulate_steps=4")
MICRO, UPDATES, EXAMPLES = 4, 3, 4  # micro-batches per update, updates, examples each
# Updates compared on a DTensor mesh, of transformer_tiny (one layer, dropout off: the
# mesh's shards draw other masks) at a learning rate that moves the weights.
MESH_STEPS = 2
MESH_HPARAMS = ("num_hidden_layers=1,layer_prepostprocess_dropout=0,attention_dropout=0,"
                "relu_dropout=0,symbol_dropout=0,batch_size=1024,learning_rate_warmup_steps=10,"
                f"optimizer_multistep_accumulate_steps={MICRO}")


def micro_batches(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """`count` batches of reversal examples, each of its own length (2 to 12 symbols,
    padded with 0 within the batch), so their token counts differ."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        longest = int(rng.integers(2, 13))
        inputs = np.zeros([EXAMPLES, longest + 1], np.int32)
        targets = np.zeros_like(inputs)
        for row in range(EXAMPLES):
            symbols = rng.integers(2, 4, size=int(rng.integers(1, longest + 1)))
            inputs[row, :len(symbols) + 1] = [*symbols, 1]
            targets[row, :len(symbols) + 1] = [*symbols[::-1], 1]
        batches.append({"inputs": inputs, "targets": targets})
    return batches


def merged(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One batch holding all of `batches`' examples (padded to the longest)."""
    longest = max(b["inputs"].shape[1] for b in batches)
    return {name: np.concatenate([np.pad(b[name], [(0, 0), (0, longest - b[name].shape[1])])
                                  for b in batches]) for name in ("inputs", "targets")}


def dataset(batches):
    import tensorflow as tf

    spec = {name: tf.TensorSpec([None, None], tf.int32) for name in ("inputs", "targets")}
    return tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=spec)


def make_task(data_dir: str, accumulate: int):
    from t2t import registry
    from t2t.hparams.basic import create_hparams
    from t2t.trainer import task as task_lib

    hparams = create_hparams("transformer_tiny",
                             f"{HPARAMS},optimizer_multistep_accumulate_steps={accumulate}")
    return task_lib.Task(registry.problem(PROBLEM), "transformer", hparams, data_dir)


def build(task, strategy, start: list[np.ndarray] | None):
    """(model, optimizer) in the strategy's scope, from the weights `start` if given."""
    with strategy.scope():
        model = task.build_model()
        optimizer, _ = task.build_optimizer(model, train_steps=100)
    if start is not None:
        for variable, value in zip(model.variables, start, strict=True):
            variable.assign(value)
    return model, optimizer


def host_values(strategy, variables) -> list[np.ndarray]:
    return [np.asarray(strategy.experimental_local_results(v.value)[0]) for v in variables]


def train(task, hooks, batches, start):
    """Trains UPDATES steps through `hooks` on `batches` (one per replica and micro-batch,
    in the order the input hands them out): (weights, [(loss, grad norm, counts)])."""
    from t2t.trainer import hooks as hooks_lib

    model, optimizer = build(task, hooks.strategy, start)
    step = hooks.train_step(task.train_step_fn(model, optimizer))
    results = []
    if isinstance(hooks, hooks_lib.ParameterServerHooks):  # the scheduled function, here
        iterator = iter(dataset(batches))
        for _ in range(UPDATES):
            loss, norm, counts = step(iterator)
            results.append((float(loss), float(norm), np.asarray(counts).tolist()))
    else:
        iterator = hooks.train_iterator(lambda context: dataset(batches))
        for i in range(UPDATES):
            loss, norm, counts, _ = hooks.run_steps(step, iterator, i, UPDATES, (), False)
            results.append((loss, norm, counts))
    assert int(optimizer.iterations.numpy()) == UPDATES  # steps count updates
    return host_values(hooks.strategy, model.variables), results


def one_device_hooks():
    import tensorflow as tf

    from t2t.config import RuntimeConfig
    from t2t.trainer import hooks as hooks_lib
    from t2t.trainer.runtime import Runtime

    return hooks_lib.StrategyHooks(Runtime(RuntimeConfig(), tf.distribute.get_strategy(), 1))


def reference(data_dir: str, replicas: int) -> dict:
    """The start weights, the micro-batches (MICRO per replica and update) and, on one
    device, the weights and results of UPDATES updates of one batch holding them all."""
    whole, hooks = make_task(data_dir, 0), one_device_hooks()
    start = [v.numpy() for v in build(whole, hooks.strategy, None)[0].variables]
    batches = micro_batches(MICRO * UPDATES * replicas, seed=7)
    per_update = MICRO * replicas
    big = [merged(batches[u * per_update:(u + 1) * per_update]) for u in range(UPDATES)]
    weights, results = train(whole, hooks, big, start)
    return {"start": start, "batches": batches, "micro": per_update, "weights": weights,
            "results": results}


def compare(data_dir: str, accumulating_hooks, expected: dict) -> dict:
    """`expected` (a `reference`) against the same updates accumulated through
    `accumulating_hooks`: the largest weight difference and both results."""
    weights, results = train(make_task(data_dir, MICRO), accumulating_hooks,
                             expected["batches"], expected["start"])
    start, expected_weights = expected["start"], expected["weights"]
    return {"micro": expected["micro"], "results": results,
            "expected_results": expected["results"],
            "max_weight_difference": max(float(np.max(np.abs(a - b)))
                                         for a, b in zip(weights, expected_weights, strict=True)),
            "moved": max(float(np.max(np.abs(a - b)))
                         for a, b in zip(expected_weights, start, strict=True))}


def assert_equal_training(out: dict) -> None:
    assert out["moved"] > 1e-3  # the weights trained: a difference would show
    assert out["max_weight_difference"] < 1e-5, out["max_weight_difference"]
    for (loss, norm, counts), (loss1, norm1, counts1) in zip(
            out["results"], out["expected_results"], strict=True):
        assert loss == pytest.approx(loss1, rel=1e-5) and norm == pytest.approx(norm1, rel=1e-5)
        assert norm1 > 0.5  # clip_grad_norm=0.5 clipped: the scale of the sum matters
        assert counts[:2] == counts1[:2]  # examples and tokens: all micro-batches'
    # Token positions (padding included) are the micro-batches' own, less than merged.
    positions = [sum(b[k].size for b in micro_batches(len(out["results"]) * out["micro"], 7)[
        u * out["micro"]:(u + 1) * out["micro"]] for k in ("inputs", "targets"))
        for u in range(len(out["results"]))]
    assert [counts[2] for _, _, counts in out["results"]] == positions


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    from t2t import registry

    path = str(tmp_path_factory.mktemp("data"))
    registry.problem(PROBLEM).generate_data(path, path + "/tmp", progress=False)
    return path


@pytest.fixture(scope="module")
def one_batch(data_dir) -> dict:
    return reference(data_dir, replicas=1)


@pytest.mark.parametrize("hooks_class", ["StrategyHooks", "ParameterServerHooks"])
def test_four_micro_batches_train_as_one_batch_holding_them(data_dir, one_batch, hooks_class):
    """One device: replica-local variables (StrategyHooks) and the tensors a parameter
    server's worker carries through its loop (its scheduled function, run here)."""
    from t2t.trainer import hooks as hooks_lib

    hooks = getattr(hooks_lib, hooks_class)(one_device_hooks().runtime)
    assert_equal_training(compare(data_dir, hooks, one_batch))


def test_two_mirrored_replicas_accumulate_as_one_device(data_dir):
    command = [sys.executable, "-m", "tests.trainer.test_accumulation", "mirrored", data_dir]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["replicas"] == 2 and out["results"][0][2][0] == 2 * MICRO * EXAMPLES
    assert_equal_training(out)


@pytest.mark.slow  # ~50 CPU-s (DTensor traces a step for ~10 s): CI keeps the others
def test_a_dtensor_mesh_accumulates_as_one_device(data_dir, tmp_path):
    command = [sys.executable, "-m", "tests.trainer.test_accumulation", "mesh", data_dir,
               str(tmp_path)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert "effective batch 4 x 1024 tokens (the global batch of the mesh) = 4096" in run.stdout
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(out["mesh_losses"]) == MESH_STEPS and out["variables"] > 60
    np.testing.assert_allclose(out["mesh_losses"], out["single_losses"], rtol=1e-5)
    assert out["moved"] > 1e-3  # the weights trained: a difference would show
    assert out["max_weight_difference"] < 1e-5, out["max_weight_difference"]


@pytest.mark.slow  # 2-3 TensorFlow processes each (~60 CPU-s): python -m pytest -m slow
@pytest.mark.parametrize("cluster, expected", [
    (["--num_workers=2"], "effective batch 2 x 4096 tokens x 2 replicas = 16384 tokens"),
    (["--num_workers=1", "--num_ps=1"], "effective batch 2 x 4096 tokens = 8192 tokens"),
])
def test_clusters_accumulate(data_dir, tmp_path, cluster, expected):
    """MultiWorkerMirrored (collectives inside the micro-batch loop) and parameter
    servers (the loop on a worker) through t2t-launch: they train and count updates."""
    from tests.helpers.runs import NO_DECODE_SUMMARIES

    out = tmp_path / "run"
    command = [sys.executable, "-m", "t2t.bin.t2t_launch", *cluster, "--", "t2t-trainer",
               f"--problem={PROBLEM}", "--model=transformer", "--hparams_set=transformer_test",
               "--hparams=optimizer_multistep_accumulate_steps=2", "--train_steps=20",
               "--log_every_steps=10", "--save_checkpoints_steps=10", "--eval_steps=2",
               f"--data_dir={data_dir}", f"--output_dir={out}", NO_DECODE_SUMMARIES,
               *(["--sync=false"] if "--num_ps=1" in cluster else [])]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    shown = run.stdout + run.stderr
    assert run.returncode == 0, shown[-4000:]
    assert expected in shown and "step 20/20 loss " in shown and "micro-batches/s)" in shown
    assert sorted(p.name for p in out.glob("ckpt-*.index")) == ["ckpt-10.index", "ckpt-20.index"]


def _trainer(data_dir, output_dir, steps):
    from t2t import registry
    from t2t.config import InputConfig, RuntimeConfig, TrainerConfig
    from t2t.hparams.basic import create_hparams
    from t2t.trainer.trainer import Trainer

    hparams = create_hparams("transformer_test", RUN_HPARAMS)
    config = TrainerConfig(train_steps=steps, save_checkpoints_steps=2, log_every_steps=1,
                           local_eval_frequency=1000, decode_summaries=0)
    return Trainer(registry.problem(PROBLEM), "transformer", hparams, data_dir,
                   str(output_dir), config, RuntimeConfig(random_seed=1),
                   InputConfig(deterministic=True, seed=1))


def test_a_run_counts_updates_and_a_resumed_run_continues_exactly(data_dir, tmp_path, capsys):
    from t2t.data import problem as problem_lib

    straight = _trainer(data_dir, tmp_path / "straight", 4)
    straight.train(until_step=2)
    shutil.copytree(tmp_path / "straight", tmp_path / "resumed")  # as saved at step 2
    straight.train()
    shown = capsys.readouterr().out
    assert ("Accumulating 4 micro-batches per update: effective batch 4 x 256 tokens = "
            "1024 tokens per update; steps count updates.") in shown
    assert "step 4/4 loss " in shown and " updates/s (" in shown and "micro-batches/s)" in shown
    assert [step for step, _ in straight.loss_history] == [1, 2, 3, 4]
    # Each update read 4 batches of the input: 16 in all.
    task = straight.task
    batches = task.input_fn(problem_lib.TRAIN, straight.input_config, task.batching())(None)
    read = sum(int(b["targets"].shape[0]) for b in batches.take(16))
    assert int(straight.checkpoints.examples_seen.numpy()) == read

    resumed = _trainer(data_dir, tmp_path / "resumed", 4)  # a new process would do the same
    assert resumed.step == 2
    resumed.train()
    assert resumed.loss_history == straight.loss_history[2:]
    for a, b in zip(resumed.model.variables + resumed.optimizer.variables,
                    straight.model.variables + straight.optimizer.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)


def test_the_progress_line_says_updates_and_micro_batches():
    from t2t.trainer import summaries

    progress = summaries.Progress(0, 2, every=1, micro_batches_per_update=4)
    line = progress.update(1, 0.5, examples=8, tokens=40)
    assert " updates/s (" in line and " micro-batches/s) " in line and "steps/s" not in line
    rates = progress.rates()
    assert rates["micro_batches_per_update"] == 4.0
    assert rates["micro_batches_per_sec"] == pytest.approx(4 * rates["steps_per_sec"])
    assert "micro_batches_per_update" not in summaries.Progress(0, 2, every=1).rates()


def test_accumulate_steps_are_checked_and_described():
    from t2t.hparams.hparams import HParams
    from t2t.trainer import accumulation

    for value, steps in [(0, 1), (1, 1), (8, 8)]:
        assert accumulation.accumulate_steps(HParams(optimizer_multistep_accumulate_steps=value)) == steps
    for bad in (-2, 2.5, "4"):
        with pytest.raises(ValueError, match=rf"optimizer_multistep_accumulate_steps={bad!r}: "
                                             r"give the number of micro-batches"):
            accumulation.accumulate_steps(HParams(optimizer_multistep_accumulate_steps=bad))
    assert accumulation.description(4, 1024, "tokens", 2) == (
        "Accumulating 4 micro-batches per update: effective batch 4 x 1024 tokens x 2 "
        "replicas = 8192 tokens per update; steps count updates.")
    assert "4 x 32 examples = 128 examples per update" in accumulation.description(
        4, 32, "examples", 1)


def mirrored_main(data_dir: str) -> None:
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    from t2t.config import RuntimeConfig
    from t2t.trainer import hooks as hooks_lib
    from t2t.trainer.runtime import Runtime

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    hooks = hooks_lib.StrategyHooks(Runtime(RuntimeConfig(), strategy, 1))
    out = compare(data_dir, hooks, reference(data_dir, replicas=2))
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, **out}))


def mesh_main(data_dir: str, out: str) -> None:
    """MESH_STEPS updates of MICRO micro-batches on a 2x2 DTensor mesh and on one device,
    from the same start and data: prints the losses and the largest weight difference."""
    from tests.parallel import mesh_run
    from tests.parallel.test_mesh_training import MESH_2X2

    def trainer(where: str, mesh: str = ""):
        from t2t import registry
        from t2t.config import InputConfig, RuntimeConfig, TrainerConfig
        from t2t.hparams.basic import create_hparams
        from t2t.trainer.trainer import Trainer

        layout = f",mesh_shape={mesh.split('|')[0]},layout={mesh.split('|')[1]}" if mesh else ""
        hparams = create_hparams("transformer_tiny", f"{MESH_HPARAMS}{layout}")
        config = TrainerConfig(train_steps=MESH_STEPS, save_checkpoints_steps=1000,
                               log_every_steps=1, local_eval_frequency=1000, decode_summaries=0)
        return Trainer(registry.problem(PROBLEM), "transformer", hparams, data_dir,
                       os.path.join(out, where), config, RuntimeConfig(random_seed=1),
                       InputConfig(deterministic=True, seed=1))

    on_mesh = trainer("mesh", MESH_2X2)  # first: it splits the CPU into the mesh's devices
    on_mesh.train()
    single = trainer("single")
    start = mesh_run.values(single)
    single.train()
    a, b = mesh_run.values(on_mesh), mesh_run.values(single)

    def largest_difference(x, y):
        return max(float(np.max(np.abs(x[k] - y[k]))) for k in x if k.startswith("model/"))

    print(json.dumps({"mesh_losses": [v for _, v in on_mesh.loss_history],
                      "single_losses": [v for _, v in single.loss_history],
                      "max_weight_difference": largest_difference(a, b),
                      "moved": largest_difference(b, start), "variables": len(a)}))


if __name__ == "__main__":
    if sys.argv[1] == "mirrored":
        mirrored_main(sys.argv[2])
    elif sys.argv[1] == "mesh":
        mesh_main(sys.argv[2], sys.argv[3])
