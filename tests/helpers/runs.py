"""Training runs in tests: a run's directory as t2t-trainer leaves it, without
training (for the binaries' end-to-end tests), and the profiler traces a run wrote."""

from __future__ import annotations

import glob
import os
import pathlib

# A trainer flag for runs whose evaluations need no TensorBoard decodes: the chief's
# decodes are the same code under every strategy (tested with one device), and their
# first trace costs ~7 CPU-s per run.
NO_DECODE_SUMMARIES = "--gin_param=TrainerConfig.decode_summaries=0"


def untrained_run(problem_name: str, root: pathlib.Path) -> tuple[str, str]:
    """(data_dir, output_dir): the problem's data generated under `root`, and a run of an
    untrained transformer_test (run.json, hparams.json, a checkpoint at step 0)."""
    from t2t import registry
    from t2t.config import RuntimeConfig, TrainerConfig
    from t2t.hparams.basic import create_hparams
    from t2t.trainer.trainer import Trainer

    data_dir, output_dir = str(root / "data"), str(root / "run")
    problem = registry.problem(problem_name)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    trainer = Trainer(problem, "transformer", create_hparams("transformer_test", "batch_size=256"),
                      data_dir, output_dir, TrainerConfig(train_steps=0), RuntimeConfig(random_seed=1),
                      run_info={"hparams_set": "transformer_test", "hparams": "batch_size=256"})
    assert trainer.save().endswith("ckpt-0")
    return data_dir, output_dir


def trained_transformer_run(problem_name: str, root: pathlib.Path, steps: int,
                            hparams_overrides: str) -> dict:
    """transformer_test trained `steps` steps on `problem_name` (data under `root`), saved,
    and loaded for decoding: {"problem", "model", "hparams", "data_dir", "run"}."""
    from t2t import registry
    from t2t.config import RuntimeConfig, TrainerConfig
    from t2t.decoding import decoder as decoder_lib
    from t2t.hparams.basic import create_hparams
    from t2t.trainer.trainer import Trainer

    data_dir, run = str(root / "data"), str(root / "run")
    problem = registry.problem(problem_name)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    hparams = create_hparams("transformer_test", hparams_overrides)
    trainer = Trainer(problem, "transformer", hparams, data_dir, run,
                      TrainerConfig(train_steps=steps, log_every_steps=1000, decode_summaries=0,
                                    local_eval_frequency=10**6, save_checkpoints_steps=10**6,
                                    layer_summaries=False),
                      RuntimeConfig(random_seed=1),
                      run_info={"hparams_set": "transformer_test", "hparams": hparams_overrides})
    trainer.train()
    trainer.save()
    model = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    return {"problem": problem, "model": model, "hparams": hparams, "data_dir": data_dir,
            "run": run}


def profile_traces(output_dir) -> list[str]:
    """The trace files --profile_steps wrote under the run's train/ summaries."""
    return glob.glob(os.path.join(str(output_dir), "train", "plugins", "profile", "*",
                                  "*.xplane.pb"))


def assert_one_trace(output_dir, marker: bytes) -> None:
    """--profile_steps wrote one trace (the chief's) holding `marker`."""
    traces = profile_traces(output_dir)
    assert len(traces) == 1, traces
    with open(traces[0], "rb") as f:
        assert marker in f.read()
