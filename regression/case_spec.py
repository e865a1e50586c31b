"""What a regression case is: the `Case` record and the vocabulary its fields use.

A case runs `t2t-datagen` then `t2t-trainer` and checks one metric of the final
evaluation (a key of the run's `eval_results.jsonl`) against a band [low, high].

- `quick` cases form CI's quick subset (`python -m regression run --quick`).
- `hardware` names what the case needs. "cpu-2core" cases run on any machine with two
  cores; the headline cases ("8xV100", "1xGPU", ...) only run when `--hardware` lists
  that hardware.
- `measured_on` says where the band and `expected_minutes` come from.

The cases themselves are listed in regression/cases.py (and regression/image_cases.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

CPU_2CORE = "cpu-2core"
FASHION_MNIST_MIRROR = "/usr/share/datasets/fashion-mnist"

# Local data mirrors -> how to get them (shown when a case is skipped for a missing one).
MIRROR_SOURCES = {
    FASHION_MNIST_MIRROR: "on Debian/Ubuntu: apt-get install dataset-fashion-mnist",
}

# Programs a case's data needs on PATH -> how to get them (shown when it is skipped).
PROGRAM_SOURCES = {
    "espeak-ng": "on Debian/Ubuntu: apt-get install espeak-ng",
}

# Strategy name -> trainer flags; None: the trainer cannot run that strategy yet.
STRATEGIES: dict[str, tuple[str, ...] | None] = {
    "default": (),
    "mirrored_cpu_2": ("--cpu_devices=2",),
    "mirrored_gpu_8": ("--worker_gpu=8",),
    "multi_worker_2": (),
    "ps_1_worker_1": ("--sync=false",),
}
# Strategy name -> t2t-launch flags: the trainer runs as a local cluster of processes.
LAUNCHES: dict[str, tuple[str, ...]] = {
    "multi_worker_2": ("--num_workers=2",),
    "ps_1_worker_1": ("--num_workers=1", "--num_ps=1"),
}

# Metrics measured after training by t2t-decoder (bleu, chrf; wer, cer of speech) and
# t2t-exporter.
DECODE_METRICS = ("bleu", "chrf", "wer", "cer")
POST_TRAINING_METRICS = (*DECODE_METRICS, "export_parity", "sample_agreement")

NOT_MEASURED = "not measured yet: band set by the lead from a target, not from a run here"


@dataclasses.dataclass(frozen=True)
class Case:
    """One regression run and the band its final metric must fall in."""

    name: str
    problem: str
    model: str
    hparams_set: str
    train_steps: int
    metric: str
    band: tuple[float, float]
    hparams: str = ""
    # Extra t2t-trainer flags, e.g. {"local_eval_frequency": 500, "eval_steps": 0}.
    trainer_flags: Mapping[str, object] = dataclasses.field(default_factory=dict)
    strategy: str = "default"
    quick: bool = False
    hardware: str = CPU_2CORE
    measured_on: str = NOT_MEASURED
    expected_minutes: float = 0.0
    data_mirror: str | None = None
    # Programs the case needs on PATH (e.g. espeak-ng to synthesize its corpus).
    programs: tuple[str, ...] = ()
    notes: str = ""
    # After training, t2t-decoder decodes the dev split (t2t-datagen --dump_text) with
    # these decode hparams, e.g. "beam_size=4,alpha=0.6", scored against its targets:
    # metrics "bleu" and "chrf" (sacrebleu, 0-100); of a speech problem, "wer" and "cer"
    # (jiwer, percent).
    decode_hparams: str | None = None
    decode_split: str = "dev"
    # More splits decoded the same way after training; their scores are named
    # "<split>_<metric>" (e.g. "test_wer" beside the decode_split's "wer").
    also_decode_splits: tuple[str, ...] = ()
    # After training, t2t-exporter writes a SavedModel; its parity gate (a fresh process
    # decodes dev examples with the SavedModel and must agree with t2t's own decoding)
    # gives metric "export_parity": 1.0 when it passed, 0.0 when not.
    export: bool = False
    # More bands the case must meet, {metric: (low, high)}, besides `metric`/`band`.
    also: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    # After training, `t2t-trainer --schedule=evaluate --eval_split=SPLIT` evaluates the
    # whole split: its metrics are named "SPLIT_<metric>" (e.g. test_bits_per_byte).
    eval_split_after: str | None = None
    # A figure computed on the case's data (regression.baselines): the main metric must
    # also be below it (its band's high end becomes min(high, baseline)).
    below_baseline: str | None = None
    # A classifier case of the same data: after training, class -> image samples are
    # labelled by it, giving metric "sample_agreement" (regression.sample_agreement).
    sample_agreement: str | None = None
    # A deterministic case's figures as recorded at a known-good commit, {metric: (value,
    # tolerance)}: the metric must also lie within value +- tolerance. The guard on
    # learning: a change that keeps every single step equal can still learn less (16-bit
    # dropout took this case from 0.9508 to 0.8182 inside its band); the tolerance is a
    # few times the spread that other seeds and other dropout masks give.
    recorded: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def bands(self) -> dict[str, tuple[float, float]]:
        """Every metric the case checks -> its band (the main metric first), each narrowed
        to its recorded value +- tolerance where one is recorded."""
        bands = {self.metric: tuple(self.band), **{k: tuple(v) for k, v in self.also.items()}}
        for name, (value, tolerance) in self.recorded.items():
            low, high = bands.get(name, (-math.inf, math.inf))
            bands[name] = (max(low, round(value - tolerance, 6)),
                           min(high, round(value + tolerance, 6)))
        return bands

    def trainer_args(self) -> list[str]:
        """The case's own t2t-trainer flags (without --data_dir/--output_dir)."""
        args = [f"--problem={self.problem}", f"--model={self.model}",
                f"--hparams_set={self.hparams_set}"]
        if self.hparams:
            args.append(f"--hparams={self.hparams}")
        args.append(f"--train_steps={self.train_steps}")
        args += list(STRATEGIES.get(self.strategy) or ())
        args += [f"--{key}={_flag_value(value)}" for key, value in self.trainer_flags.items()]
        return args

    @property
    def curve_metric(self) -> str:
        """The metric of the training curve (evaluations of the dev split)."""
        prefix = f"{self.eval_split_after}_" if self.eval_split_after else ""
        return self.metric.removeprefix(prefix)

    def datagen_args(self) -> list[str]:
        args = [f"--problem={self.problem}"]
        if self.data_mirror:
            args.append(f"--data_mirror={self.data_mirror}")
        return args


def _flag_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
