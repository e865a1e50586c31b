"""Tensor2Tensor's flag habits: one flag set for every binary, and T2T's renamed or
dropped flags.

Tensor2Tensor's decoder and exporter imported the trainer's flags, so users pass one
flag set to every binary. Each t2t binary calls `accept_shared_flags(binary)` (the
trainer through `common_flags.accept_shared_flags`); just before parsing, `before_parse`
defines every shared flag the binary lacks (t2t-trainer's flags, the decoding flags
T2T shared, and T2T's renamed or dropped flags in `T2T_FLAGS`), and `after_parse`
prints one line on stderr for each of them the user gave:

    note: t2t-decoder ignores --tmp_dir (no data is generated here)
    note: --save_checkpoints_secs is not in t2t; use --save_checkpoints_steps
    note: --eval_use_test_set is not in t2t; applied as --decode_split=test

Defining them at parse time, not import, lets a process import several binaries
(absl refuses a flag defined twice). `python -m t2t.bin.t2t_flag_compat --write
docs/how-to/coming-from-t2t.md` writes the table of `T2T_FLAGS` between its t2t-flags
markers (`python -m docsite reference` writes every generated block).
"""

from __future__ import annotations

import dataclasses
import re
import sys
import typing

from absl import flags

from t2t import config
from t2t.bin import config_flags
from t2t.utils import readme_tables

FLAGS = flags.FLAGS

BINARIES = ("t2t-datagen", "t2t-trainer", "t2t-decoder", "t2t-exporter", "t2t-tuner",
            "t2t-bleu", "t2t-translate-all", "t2t-avg-all", "t2t-launch",
            "t2t-make-tf-configs", "t2t-serve", "t2t-import")


@dataclasses.dataclass(frozen=True)
class Change:
    """What became of a Tensor2Tensor flag in t2t.

    use: the t2t way (printed after "--NAME is not in t2t; "), or, with `kept_in`, how
      the kept flag differs from T2T's. A flag named without a binary before it
      ("--save_checkpoints_steps") is t2t-trainer's; others are "t2t-tuner --objective".
    boolean: T2T's flag took no value (--flag, --noflag).
    apply: t2t flags that take its value, in a binary that has one (the first it has).
    value: the value `apply` sets (a boolean T2T flag given true); None: the flag's own.
    unless: flags of t2t that, given, make `apply` moot (nothing is applied then).
    kept_in: the t2t binary that kept a flag of this name.
    """

    use: str
    boolean: bool = False
    apply: tuple[str, ...] = ()
    value: str | None = None
    unless: tuple[str, ...] = ()
    kept_in: str = ""


_NO_CLOUD = "nothing to set: t2t creates no Cloud VMs or TPUs"
_GRAPPLER = "nothing to set: TensorFlow's graph optimizer (Grappler) is always on"
_JOBS = ("nothing to set: TF_CONFIG names the jobs (t2t-launch and t2t-make-tf-configs "
         "write it)")
_ONE_PROCESS = "nothing to set: t2t-datagen generates each problem in one process"

# Tensor2Tensor's flags (utils/flags.py, bin/t2t_trainer.py, t2t_decoder.py,
# t2t_datagen.py, serving/export.py) that t2t renamed, dropped or kept with a change.
T2T_FLAGS: dict[str, Change] = {
    "as_text": Change("nothing to set: t2t-exporter writes binary SavedModels", True),
    "autotune_max_trials": Change("use t2t-tuner --num_trials", apply=("num_trials",)),
    "autotune_maximize": Change("use t2t-tuner --maximize or t2t-tuner --minimize", True),
    "autotune_objective": Change("use t2t-tuner --objective", apply=("objective",)),
    "autotune_parallel_trials": Change("use t2t-tuner --parallel_trials",
                                       apply=("parallel_trials",)),
    "cloud_delete_on_done": Change(_NO_CLOUD, True),
    "cloud_mlengine": Change("nothing to set: for a cluster, t2t-make-tf-configs --tfjob "
                             "writes a Kubernetes TFJob", True),
    "cloud_mlengine_master_type": Change("nothing to set: t2t-make-tf-configs "
                                         "--gpus_per_worker sizes a Kubernetes TFJob"),
    "cloud_tpu": Change("create the TPU yourself and give --use_tpu --tpu=NAME", True),
    "cloud_tpu_name": Change("an alias of --tpu", kept_in="t2t-trainer"),
    "cloud_vm_name": Change(_NO_CLOUD),
    "daisy_chain_variables": Change("nothing to set: tf.distribute keeps the replicas' "
                                    "variables in sync", True),
    "dbgprofile": Change("use --profile_steps=START,END (a TensorBoard profiler trace)",
                         True),
    "decode_in_memory": Change("nothing to set: t2t-decoder streams the file in chunks and "
                               "decodes in batches (t2t-decoder "
                               "--decode_hparams=batch_size=N)", True),
    "decode_shards": Change("t2t-decoder --decode_hparams=shards=N,shard_id=K (one "
                            "t2t-decoder per part)"),
    "disable_grappler_optimizations": Change(_GRAPPLER, True),
    "enable_graph_rewriter": Change(_GRAPPLER, True),
    "eval_run_autoregressive": Change("use --hparams=eval_run_autoregressive=true (each "
                                      "evaluation also decodes the examples it reads "
                                      "greedily: decoded/accuracy, "
                                      "decoded/accuracy_per_sequence and the problem's "
                                      "BLEU/ROUGE/WER)", True),
    "eval_throttle_seconds": Change("use --local_eval_frequency (evaluations are every N "
                                    "steps)"),
    "eval_use_test_set": Change("use t2t-trainer --eval_split=test or t2t-decoder "
                                "--decode_split=test", True,
                                apply=("eval_split", "decode_split"), value="test",
                                unless=("decode_from_file", "decode_interactive", "score_file")),
    "exclude_problems": Change("nothing to set: t2t-datagen --problem takes a "
                               "comma-separated list of names"),
    "experimental_optimize_placement": Change(_GRAPPLER, True),
    "export_as_tfhub": Change("nothing to set: t2t-exporter writes a TF2 SavedModel, which "
                              "hub.load reads", True),
    "export_saved_model": Change("run t2t-exporter --output_dir=RUN after training", True),
    "gpu_order": Change("set CUDA_VISIBLE_DEVICES (its order is the GPUs' order)"),
    "hparams_range": Change("the search space of t2t-tuner --hparams_range; t2t-trainer "
                            "trains one configuration", kept_in="t2t-tuner"),
    "inter_op_parallelism_threads": Change("set TF_NUM_INTEROP_THREADS in the environment"),
    "intra_op_parallelism_threads": Change("set TF_NUM_INTRAOP_THREADS in the environment"),
    "iterations_per_loop": Change("nothing to set: each training step is one tf.function "
                                  "call"),
    "keep_checkpoint_every_n_hours": Change("use --keep_checkpoint_max (checkpoints are "
                                            "kept by count)"),
    "keep_timestamp": Change("nothing to set: `touch -r CHECKPOINT.index DECODES` does it",
                             True),
    "locally_shard_to_cpu": Change("use --cpu_devices=N (N logical CPU replicas)", True),
    "log_device_placement": Change("call tf.debugging.set_log_device_placement(True) in "
                                   "your --t2t_usr_dir", True),
    "log_step_count_steps": Change("use --log_every_steps", apply=("log_every_steps",)),
    "master": Change("an alias of --tpu (a TPU's name or grpc:// address); a multi-worker "
                     "cluster comes from TF_CONFIG or --worker_hosts", kept_in="t2t-trainer"),
    "num_concurrent_processes": Change(_ONE_PROCESS),
    "only_list": Change("use --registry_help (every registered name)", True),
    "optionally_use_dist_strat": Change("nothing to set: t2t always trains with "
                                        "tf.distribute", True),
    "problems": Change("use --problem", apply=("problem",)),
    "profile": Change("use --profile_steps=START,END (a TensorBoard profiler trace)", True),
    "ps_gpu": Change("nothing to set: parameter servers only hold variables"),
    "ps_job": Change(_JOBS),
    "save_checkpoints_secs": Change("use --save_checkpoints_steps"),
    "schedule": Change(f"values {', '.join(config.SCHEDULES)}; T2T's "
                       f"continuous_train_and_eval is train_and_evaluate",
                       kept_in="t2t-trainer"),
    "std_server_protocol": Change('set "rpc_layer" in TF_CONFIG (default grpc)'),
    "sync": Change("default true (T2T: false); with parameter servers give --sync=false "
                   "(asynchronous ParameterServerStrategy)", kept_in="t2t-trainer"),
    "task_id": Change(_ONE_PROCESS),
    "task_id_end": Change(_ONE_PROCESS),
    "task_id_start": Change(_ONE_PROCESS),
    "tfdbg": Change("use --check_numerics (names the op of the first NaN or Inf; no "
                    "debugger CLI)", True),
    "tmp_dir": Change("default DATA_DIR/tmp (T2T: /tmp/t2t_datagen)", kept_in="t2t-trainer"),
    "tpu_infeed_sleep_secs": Change("nothing to set: TPUStrategy feeds the TPU itself"),
    "tpu_job_name": Change("nothing to set: the TPU cluster resolver finds the job"),
    "tpu_num_shards": Change("nothing to set: TPUStrategy uses every core of --tpu"),
    "use_tpu_estimator": Change("nothing to set: t2t has no Estimator", True),
    "worker_gpu_memory_fraction": Change("use --gpu_memory_limit_mb (memory growth, "
                                         "--gpu_memory_growth, is on by default)"),
    "worker_job": Change(_JOBS),
    "xla_jit_level": Change("use --xla_compile (XLA-compiles the training step)"),
}

# Why a binary ignores a shared flag: by (binary, flag), else (binary, topic), else the
# binary, else the topic.
TOPIC_REASONS = {
    "task": "no problem or model is loaded here",
    "data": "no data is generated here",
    "train": "no training here",
    "devices": "no training here",
    "general": "no user code or gin config is loaded here",
    "decode": "no decoding here",
}
BINARY_REASONS = {
    "t2t-launch": "give it to the command after `--`",
    "t2t-make-tf-configs": "give it to the trainer command",
    "t2t-serve": "it serves exported models as they are; t2t-exporter fixed their settings",
    "t2t-import": "it only reads a checkpoint folder into a run; give it to the next binary",
}
BINARY_TOPIC_REASONS = {
    ("t2t-datagen", "task"): "it only prepares data",
    ("t2t-trainer", "decode"): "decoding settings are t2t-decoder's",
    ("t2t-exporter", "decode"): "the export decodes no file",
    ("t2t-tuner", "train"): "its trials take only the trainer flags its help lists",
    ("t2t-tuner", "devices"): "its trials take only the trainer flags its help lists",
}
FLAG_REASONS = {
    ("t2t-translate-all", "checkpoint_path"): "it translates with every checkpoint of "
                                              "--model_dir",
    ("t2t-translate-all", "decode_from_file"): "its input is --source",
    ("t2t-translate-all", "decode_to_file"): "it writes TRANSLATIONS_DIR/PROBLEM-STEP, see "
                                             "--translations_dir",
    ("t2t-translate-all", "decode_reference"): "score with t2t-bleu --translations_dir",
    ("t2t-decoder", "random_seed"): "sampling's seed is --decode_hparams=seed=N",
    ("t2t-decoder", "eval_split"): "its split is --decode_split",
    ("t2t-datagen", "random_seed"): "each problem's generator has a fixed seed",
    ("t2t-datagen", "generate_data"): "generating is what it does",
    ("t2t-tuner", "schedule"): "every trial runs train_and_evaluate",
}

# Shared flags besides t2t-trainer's: common_flags' and the decoding flags T2T shared.
_GENERAL = {"t2t_usr_dir": False, "registry_help": True, "gin_file": False,
            "gin_param": False}
_DECODE = ("decode_hparams", "checkpoint_path", "decode_from_file", "decode_to_file",
           "decode_reference")
# t2t-trainer's flags from the config tree, with their topics.
_TRAINER_CONFIGS = ((config.TaskConfig, None, "task"),
                    (config.DataConfig, ("generate_data", "tmp_dir", "data_mirror"), "data"),
                    (config.TrainerConfig, None, "train"),
                    (config.RuntimeConfig, None, "devices"))


def shared_flags() -> dict[str, tuple[bool, str]]:
    """{name: (boolean, topic)} of the flags every binary accepts: t2t-trainer's (its
    config fields and their aliases), the general and decoding flags, and `T2T_FLAGS`."""
    shared: dict[str, tuple[bool, str]] = {}
    for config_cls, only, topic in _TRAINER_CONFIGS:
        hints = typing.get_type_hints(config_cls)
        for field, name in config_flags.flag_fields(config_cls, only):
            boolean = hints[field.name] is bool
            for flag_name in (name, *(field.metadata.get("aliases") or ())):
                shared[flag_name] = (boolean, topic)
    shared.update({name: (boolean, "general") for name, boolean in _GENERAL.items()})
    shared.update({name: (False, "decode") for name in _DECODE})
    for name, change in T2T_FLAGS.items():
        shared.setdefault(name, (change.boolean, "t2t"))
    return shared


def reason(binary: str, name: str, topic: str) -> str:
    """Why `binary` ignores the shared flag --`name` (of `topic`)."""
    change = T2T_FLAGS.get(name)
    if topic == "t2t" and change is not None and change.kept_in:
        return f"{change.kept_in} takes it"
    return (FLAG_REASONS.get((binary, name)) or BINARY_TOPIC_REASONS.get((binary, topic))
            or BINARY_REASONS.get(binary) or TOPIC_REASONS[topic])


_binary: str | None = None
_pending: dict[str, str] = {}  # flag name -> its topic, for the flags the binary ignores
_defined: set[str] = set()  # the flags defined here


def accept_shared_flags(binary: str) -> None:
    """Makes `binary` (e.g. "t2t-decoder") accept the shared flags it does not define,
    each printing one note when given. Call it before `flag_help.run` (at import or in
    `run()`): the flags are defined when the command line is parsed."""
    global _binary
    if binary not in BINARIES:
        raise ValueError(f"accept_shared_flags({binary!r}): not a t2t binary; one of "
                         f"{', '.join(BINARIES)}.")
    _binary = binary


def before_parse(hidden: tuple[str, ...] = ()) -> None:
    """Defines the shared flags the binary lacks; `hidden`: flags it defines but does not
    use (ignored like those). Does nothing unless `accept_shared_flags` was called."""
    if _binary is None:
        return
    _pending.clear()
    for name, (boolean, topic) in shared_flags().items():
        if name in FLAGS and name not in _defined and name not in hidden:
            continue  # the binary's own flag
        if name not in FLAGS:
            change = T2T_FLAGS.get(name)
            why = (f"not in t2t; {change.use}" if change and not change.kept_in
                   else reason(_binary, name, topic))
            text = f"A shared flag: {_binary} ignores it ({why})."
            define = flags.DEFINE_bool if boolean else flags.DEFINE_string
            define(name, None, text)
            _defined.add(name)
        _pending[name] = topic


def _note(name: str, topic: str) -> str:
    """The line printed for the ignored flag --`name` the user gave (after applying the
    value where `T2T_FLAGS` says so)."""
    change = T2T_FLAGS.get(name)
    if change is None or change.kept_in:
        return f"note: {_binary} ignores --{name} ({reason(_binary, name, topic)})"
    value = FLAGS[name].value
    if change.boolean and not value:
        return f"note: --{name} is not in t2t; {change.use}"
    moot = [other for other in change.unless if other in FLAGS and FLAGS[other].value]
    if moot:
        return f"note: {_binary} ignores --{name} with --{moot[0]} (not in t2t; {change.use})"
    for target in change.apply:
        if target not in FLAGS or target in _pending:
            continue
        if FLAGS[target].present:
            return f"note: --{name} is not in t2t; ignored, as --{target} is given"
        setting = change.value if change.value is not None else str(value)
        try:
            FLAGS[target].parse(setting)  # counts as given: config_flags.build takes it
        except (flags.Error, ValueError) as e:
            sys.stderr.write(f"error: --{name}={value}, applied as --{target}: {e}\n")
            sys.exit(1)
        return f"note: --{name} is not in t2t; applied as --{target}={setting}"
    return f"note: --{name} is not in t2t; {change.use}"


def after_parse() -> None:
    """Prints one note on stderr for each ignored shared flag the user gave."""
    lines = [_note(name, topic) for name, topic in sorted(_pending.items())
             if FLAGS[name].present]
    if lines:
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()


_CITED = re.compile(r"(?:(t2t-[a-z-]+) )?--(\w+)")


def cited_flags() -> dict[str, set[str]]:
    """{binary: flag names} that `T2T_FLAGS` and the reasons name as t2t's (checked by a
    test against each binary's flags)."""
    cited: dict[str, set[str]] = {}

    def add(text: str, default: str) -> None:
        for binary, name in _CITED.findall(text):
            cited.setdefault(binary or default, set()).add(name)

    for change in T2T_FLAGS.values():
        add(change.use, change.kept_in or "t2t-trainer")
    for (binary, _), text in FLAG_REASONS.items():
        add(text, binary)
    for (binary, _), text in BINARY_TOPIC_REASONS.items():
        add(text, binary)
    return cited


_CODE = re.compile(r"((?:t2t-[a-z-]+ )?--\w+(?:=[\w,.:/=]+)?|TF_\w+|CUDA_VISIBLE_DEVICES)")

BEGIN, END = readme_tables.markers("t2t-flags")


def markdown_table() -> str:
    """The README table of `T2T_FLAGS`: each T2T flag and what t2t has instead."""
    rows = ["| Tensor2Tensor flag | In t2t |", "|---|---|"]
    for name, change in sorted(T2T_FLAGS.items()):
        if change.kept_in:
            text = f"kept in {change.kept_in}: {change.use}"
        else:
            text = f"not in t2t; {change.use}"
            if change.apply:
                text += " (applied for you)"
        text = _CODE.sub(r"`\1`", text)
        rows.append(f"| `--{name}` | {text} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Prints the table, or with --write FILE puts it between FILE's markers."""
    return readme_tables.run_cli(argv, "The table of Tensor2Tensor flags that t2t renamed "
                                 "or dropped.", markdown_table, BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
