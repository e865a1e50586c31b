"""The config tree: every setting of a run, declared once, with its default and help.

    ExperimentConfig                 what t2t-trainer runs
      task     TaskConfig            problem, model, hparams set and overrides, directories
      data     DataConfig            --generate_data, downloads, mirrors, shards
      trainer  TrainerConfig         the loop: steps, evaluation, checkpoints, logging
      runtime  RuntimeConfig         strategy (devices, cluster, TPU), precision, determinism
      input    InputConfig           how the input pipeline reads and shuffles (gin only)
    DecodeHParams                    decoding (t2t-decoder --decode_hparams; the exporter)
    ExportConfig                     t2t-exporter
    TunerConfig                      t2t-tuner's study

Each field is a `setting(...)`: its default, its help, and the flag that shows it
(`flag=False` for gin-only settings). The binaries' absl flags are generated from these
fields (`t2t.bin.config_flags`), and gin binds the same fields
(`--gin_param=TrainerConfig.train_steps=2000`); a flag given on the command line wins
over gin. Model hyperparameters are not here: they stay registered HParams sets, as in
Tensor2Tensor. Importing this module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gin

from t2t.hparams.hparams import HParams, HParamsError
from t2t.registry import close_matches

MIXED_PRECISION_CHOICES = ("bfloat16", "float16")
ALL_REDUCE_CHOICES = ("auto", "ring", "nccl")
SCHEDULES = ("train", "train_and_evaluate", "continuous_eval", "evaluate")
SAMPLERS = ("tpe", "cmaes", "random")


def setting(default: Any, help: str, *, flag: str | bool = True,
            choices: tuple[str, ...] | None = None, aliases: tuple[str, ...] = ()) -> Any:
    """A config field: `default`, its `help`, and its flag (`flag=NAME` when the flag's
    name differs from the field's; `flag=False`: settable with gin only)."""
    metadata = {"help": help, "flag": flag, "choices": choices, "aliases": aliases}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default),
                                 metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


# ------------------------------------------------------------------- the task
@gin.configurable
@dataclasses.dataclass
class TaskConfig:
    """What to train or decode, and where its files are."""

    problem: str | None = setting(None, "Registered problem name (see --registry_help).")
    model: str | None = setting(None, "Registered model name, e.g. transformer.")
    hparams_set: str | None = setting(None, "Registered hparams set, e.g. transformer_tiny.")
    hparams: str = setting("", "Overrides, e.g. 'learning_rate_constant=0.5,num_heads=2'.")
    data_dir: str | None = setting(None, "Prepared data (default: the one an existing run "
                                         "in --output_dir was given, else $T2T_DATA_DIR or "
                                         "~/t2t_data).")
    output_dir: str | None = setting(None, "Checkpoints, summaries and results (default: "
                                     "~/t2t_train/PROBLEM/MODEL-HPARAMS_SET).")


@gin.configurable
@dataclasses.dataclass
class DataConfig:
    """Preparing a problem's data (t2t-datagen, and t2t-trainer --generate_data)."""

    generate_data: bool = setting(False, "Prepare the problem's data first (skipped if "
                                  "present).")
    tmp_dir: str | None = setting(None, "Downloads and extracted archives (default: "
                                  "DATA_DIR/tmp).")
    data_mirror: str | None = setting(None, "Where to fetch data files first: a URL prefix "
                                      "(http://host/path/) or a local folder holding the "
                                      "files. Default: $T2T_DATA_MIRROR.")
    num_shards: int | None = setting(None, "Number of training shards (default: the "
                                     "problem's).")
    max_cases: int | None = setting(None, "Write at most this many examples per split.")
    progress: bool = setting(True, "Show a progress line while writing.")


# ------------------------------------------------------------------- the loop
@gin.configurable
@dataclasses.dataclass
class TrainerConfig:
    """The training loop: how long, and how often it evaluates, saves and logs."""

    schedule: str = setting("train_and_evaluate", "What to run.", choices=SCHEDULES)
    train_steps: int = setting(1000, "Total training steps (the run's last step).")
    eval_steps: int = setting(100, "Batches per evaluation; <= 0 for the whole split.")
    eval_split: str = setting("dev", "The split evaluations read: one of the problem's "
                              "splits (typically train, dev, test; the docs' problem "
                              "reference lists them). "
                              "A split other than dev records its results apart "
                              "(eval_SPLIT/, eval_results_SPLIT.jsonl).")
    local_eval_frequency: int = setting(1000, "Evaluate every this many steps.")
    save_checkpoints_steps: int = setting(1000, "Checkpoint every this many steps.")
    keep_checkpoint_max: int = setting(20, "Checkpoints kept.")
    log_every_steps: int = setting(100, "Progress line and summaries every this many steps.")
    warm_start_from: str | None = setting(None, "Checkpoint (or dir) to load weights from.")
    teacher_dir: str | None = setting(None, "Distillation: the run directory of a trained "
                                      "teacher on the same problem (any model and hparams); "
                                      "the loss mixes the hard labels with the teacher's "
                                      "distribution (hparams distill_temperature, "
                                      "distill_weight). Checkpoints hold the student only.")
    resume_from: str | None = setting(None, "Resume from this checkpoint of --output_dir "
                                      "(e.g. ckpt-1000) instead of the latest, when the "
                                      "latest is damaged; it becomes the latest, the newer "
                                      "ones stay on disk, unlisted.")
    decode_summaries: int = setting(3, "Dev examples decoded greedily into TensorBoard text "
                                    "at each evaluation.", flag=False)
    eval_decode_examples: int = setting(-1, "Eval-split examples decoded greedily at each "
                                        "evaluation to report the problem's decode metrics "
                                        "(BLEU/chrF, ROUGE-1/2/L, WER/CER) beside accuracy "
                                        "and loss. -1: 200 for problems with WER/CER, 100 "
                                        "for BLEU/ROUGE, none for the others; 0: none.")
    checkpoint_iterator: bool = setting(True, "Save the input position with the checkpoints "
                                        "(exact resume, one device).", flag=False)
    profile_steps: str = setting("", "Capture a TensorFlow profiler trace of steps START,END "
                                 "(e.g. '10,15') into the run's TensorBoard log directory "
                                 "(OUTPUT_DIR/train/plugins/profile; view it with TensorBoard's "
                                 "profile plugin: pip install 't2t[profile]'). The chief only.")
    overfit_batches: int = setting(0, "Debugging: train on the first N batches only, repeated, "
                                   "and report whether the training loss goes near zero (the "
                                   "first check when a model does not learn). 0: off.")
    eval_early_stopping_steps: int = setting(
        0, "Stop training when --eval_early_stopping_metric has not improved by "
        "--eval_early_stopping_metric_delta within this many steps (Tensor2Tensor's rule; "
        "checked at each evaluation; 0: never).")
    eval_early_stopping_metric: str = setting(
        "loss", "The evaluation metric early stopping watches: a key of eval_results.jsonl "
        "(loss, accuracy, bleu, rouge_l, wer, ...; T2T's tags such as "
        "metrics-PROBLEM/targets/approx_bleu_score work too).")
    eval_early_stopping_metric_delta: float = setting(
        0.1, "The smallest change of the metric that counts as an improvement.")
    eval_early_stopping_metric_minimize: bool | None = setting(
        None, "Whether the metric improves downwards; default: known for t2t's metrics "
        "(loss, wer: down; accuracy, bleu: up), else true (T2T's default).")
    keep_best: int = setting(
        1, "Keep the N best checkpoints by --best_metric apart from the rolling ones, in "
        "OUTPUT_DIR/best (hard links: no extra disk until the originals roll off); "
        "recorded in run.json; t2t-decoder/t2t-exporter --checkpoint_path=best read the "
        "best. 0: none.")
    best_metric: str = setting(
        "", "The evaluation metric that ranks checkpoints for --keep_best (default: "
        "--eval_early_stopping_metric); its direction as for early stopping.")
    layer_summaries: bool = setting(True, "TensorBoard: parameter and gradient norms per "
                                    "top-level layer and the update/parameter ratio at each "
                                    "logging step (one copy of the weights on those steps).",
                                    flag=False)


# ---------------------------------------------------------------- the runtime
@gin.configurable
@dataclasses.dataclass
class RuntimeConfig:
    """Process-wide settings, applied once at start-up (t2t.trainer.runtime): the
    tf.distribute strategy, numeric precision, determinism and seeds."""

    worker_gpu: int = setting(0, "GPUs to mirror over (-1: all visible).")
    cpu_devices: int = setting(0, "Mirror over this many logical CPU devices (testing "
                               "multi-replica training without GPUs).")
    tf_config: str | None = setting(None, "The cluster as TF_CONFIG JSON (default: "
                                    "$TF_CONFIG).", flag=False)
    worker_hosts: str = setting("", "Multi-worker training without a TF_CONFIG: "
                                "'host:port,host:port' of every worker (this one at "
                                "--worker_id).")
    worker_id: int = setting(0, "This worker's index in --worker_hosts.")
    worker_replicas: int = setting(0, "Number of workers (checked against --worker_hosts).")
    all_reduce: str = setting("auto", "Multi-worker all-reduce implementation.",
                              choices=ALL_REDUCE_CHOICES)
    collective_timeout_s: float = setting(
        300.0, "Seconds a multi-worker collective may wait for the other workers before the "
        "job fails (0: forever).", flag="collective_timeout")
    ps_replicas: int = setting(0, "Parameter servers (with --sync=false and a TF_CONFIG that "
                               "lists them; see t2t-launch --num_ps).")
    ps_min_shard_bytes: int = setting(
        0, "Parameter servers: split each variable of at least twice this many bytes into "
        "shards of at least this size, at most --ps_max_shards (TF's MinSizePartitioner; "
        "0: variables whole). For an embedding or softmax larger than one server.")
    ps_max_shard_bytes: int = setting(
        0, "Parameter servers: split each variable into shards of at most this many bytes, "
        "at most --ps_max_shards (TF's MaxSizePartitioner; 0: off).")
    ps_max_shards: int = setting(0, "Parameter servers: the most shards a variable is split "
                                 "into (0: one per ps task).")
    sync: bool = setting(True, "Synchronous training; --sync=false with ps tasks: "
                         "asynchronous ParameterServerStrategy.")
    use_tpu: bool = setting(False, "Train on a Cloud TPU (TPUStrategy).")
    tpu: str | None = setting(None, "TPU name or grpc:// address for --use_tpu ('local' on a "
                              "TPU VM).", aliases=("master", "cloud_tpu_name"))
    xla_compile: bool = setting(False, "Compile the forward/backward pass with XLA.")
    mixed_precision: str | None = setting(None, "Compute in 16 bits (float16 adds loss "
                                          "scaling).", choices=MIXED_PRECISION_CHOICES)
    deterministic: bool = setting(False, "Repeatable run: op determinism, fixed seeds, "
                                  "ordered input (slower).")
    random_seed: int | None = setting(None, "Seed of weights, dropout and data order.")
    check_numerics: bool = setting(False, "Debugging: stop at the first NaN or Inf any op "
                                   "produces, naming the op and its layer (TensorFlow's "
                                   "numerics checking; slower). Nothing is saved from that "
                                   "step.")
    gpu_memory_growth: bool = setting(True, "GPUs: allocate memory as needed instead of all of "
                                      "it at start-up, so that jobs can share a GPU.")
    gpu_memory_limit_mb: int = setting(0, "GPUs: use at most this many MiB of each GPU (0: no "
                                       "limit). Replaces memory growth when set.")


@gin.configurable
@dataclasses.dataclass
class InputConfig:
    """How the input pipeline reads and shuffles (not what a batch is: that is in the
    model's hparams, batch_size and max_length, as in Tensor2Tensor).

    deterministic: reproducible element order (op determinism is the runtime's job):
      with a seed, a pipeline built again yields the same batches (iterating one
      dataset object again continues its shuffles, like a new epoch).
    """

    shuffle_buffer_size: int = setting(1024, "Examples in the TRAIN shuffle buffer (0: no "
                                       "shuffling).", flag=False)
    parse_batch_size: int = setting(256, "Serialized records parsed per tf.io.parse_example "
                                    "call.", flag=False)
    num_parallel_reads: int | None = setting(None, "Files read at once (None: AUTOTUNE).",
                                             flag=False)
    deterministic: bool = setting(False, "Reproducible element order.", flag=False)
    seed: int | None = setting(None, "Seed of the file, example and batch shuffles (None: "
                               "random).", flag=False)
    prefetch_batches: int | None = setting(None, "Batches prepared ahead of the consumer "
                                           "(None: AUTOTUNE).", flag=False)


@dataclasses.dataclass
class ExperimentConfig:
    """Everything t2t-trainer needs, as one tree (Model Garden's ExperimentConfig)."""

    task: TaskConfig = dataclasses.field(default_factory=TaskConfig)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
    input: InputConfig = dataclasses.field(default_factory=InputConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------ decoding
class DecodeHParamsError(HParamsError):
    """A bad --decode_hparams string or value."""


BEAM_SEARCH_RULES = ("t2t", "transformers")  # DecodeHParams.beam_search_rule


@gin.configurable
@dataclasses.dataclass
class DecodeHParams:
    """Settings of a decoding run (`--decode_hparams="beam_size=4,alpha=0.6"`), also
    baked into an export.

    max_input_length: 0 takes the model's hparams.max_length, or
      decoding.settings.DEFAULT_MAX_INPUT_LENGTH when that is 0 too.
    """

    beam_size: int = setting(4, "1 is greedy (or sampling, with temperature > 0); more is "
                             "beam search.", flag=False)
    alpha: float = setting(0.6, "Beam search's length penalty exponent: scores are "
                           "log-probabilities / ((5 + length) / 6) ** alpha.", flag=False)
    extra_length: int = setting(50, "Tokens decoded beyond the longest input of a batch.",
                                flag=False)
    batch_size: int = setting(32, "Inputs decoded together.", flag=False)
    return_beams: bool = setting(False, "Write every beam, tab-separated, best first.",
                                 flag=False)
    write_beam_scores: bool = setting(False, "Write each output's score after it "
                                      "(tab-separated).", flag=False)
    temperature: float = setting(0.0, "Sampling temperature (beam_size=1 only); 0 is greedy.",
                                 flag=False)
    top_k: int = setting(0, "Sample among the k most likely tokens (0: all).", flag=False)
    top_p: float = setting(1.0, "Sample within the nucleus of probability top_p.", flag=False)
    max_input_length: int = setting(0, "Inputs are cut to this many tokens (before EOS); 0: "
                                    "the model's max_length. A language model's prompt "
                                    "keeps its LAST max_input_length tokens (with a "
                                    "warning).", flag=False)
    max_new_tokens: int = setting(0, "Tokens generated per input or prompt; 0: "
                                  "extra_length (for seq2seq: beyond the longest input).",
                                  flag=False)
    num_samples: int = setting(1, "Samples per input or prompt (beam_size=1), written "
                               "tab-separated on its line.", flag=False)
    seed: int = setting(-1, "Seed of sampling: >= 0 makes a sampled run repeat exactly (a "
                        "sample depends only on the prompt, the seed and its number); -1 "
                        "draws one.", flag=False)
    return_prompt: bool = setting(False, "Language models: write prompt + continuation "
                                  "instead of the continuation alone.", flag=False)
    write_attention: bool = setting(False, "Also write an HTML heat map of each output's "
                                    "encoder-decoder attention per layer and head "
                                    "(DECODE_TO_FILE.attention.html, or OUTPUT_DIR/"
                                    "decode_SPLIT.attention.html with --eval_steps).",
                                    flag=False)
    partial_targets: bool = setting(False, "Seq2seq: each input line is 'INPUT<TAB>TARGET "
                                    "PREFIX'; the output starts with the prefix's tokens "
                                    "(forced) and continues them, written without the prefix "
                                    "as in T2T (with it: return_prompt). A language model "
                                    "always continues its line (T2T's target prefix).",
                                    flag=False)
    shards: int = setting(1, "Split --decode_from_file (or the dev set) over this many runs "
                          "(T2T): see shard_id. Outputs get the suffix %03d of shard_id.",
                          flag=False)
    shard_id: int = setting(0, "The part this run decodes (0 .. shards-1): T2T's split file "
                            "DECODE_FROM_FILE%03d if present, else the shard_id-th of shards "
                            "contiguous parts of the file's records (outputs concatenated "
                            "in shard order give the file's order); dev-set examples i with "
                            "i % shards == shard_id.", flag=False)
    num_decodes: int = setting(1, "Decode the inputs this many times, pass after pass (T2T); "
                               "pass k draws sample numbers k*num_samples and on: a seeded "
                               "run differs from pass to pass but repeats.", flag=False)
    delimiter: str = setting("\\n", "What separates the inputs of --decode_from_file and "
                             "--decode_reference (T2T); escapes \\n, \\t, \\r, \\\\ and \\xHH "
                             "(\\x2c: a comma). Decodes are written one per line.", flag=False)
    force_decode_length: bool = setting(False, "Every output has exactly the decode length's "
                                        "tokens (max_new_tokens, else its own input's length "
                                        "+ extra_length): EOS cannot end it earlier.",
                                        flag=False)
    beam_search_rule: str = setting(
        "t2t", "Which hypotheses beam search keeps finished: t2t (Tensor2Tensor's: every "
        "candidate ending in EOS among the step's 2 x beam_size; at the length limit a "
        "finished one wins) or transformers (Hugging Face generate's: only those among the "
        "best beam_size; at the length limit the cut beams compete by score). With "
        "alpha=0, transformers gives generate(num_beams=N, length_penalty=0.0)'s outputs.",
        flag=False)
    given_keys: tuple[str, ...] = dataclasses.field(default=(), compare=False, metadata={
        "help": "The keys parse() found in the --decode_hparams text. These, and every key "
                "whose value differs from its default, win over the model hparams' "
                "sampling_method, sampling_temp and sampling_keep_top_k.", "flag": False})

    def is_given(self, name: str) -> bool:
        """Whether `name` was set: named in --decode_hparams (given_keys), or not at its
        default (e.g. set by dataclasses.replace or gin)."""
        return name in self.given_keys or getattr(self, name) != getattr(DecodeHParams(), name)

    @property
    def record_delimiter(self) -> str:
        """`delimiter` with its escapes (\\n, \\t, \\r, \\\\, \\xHH) replaced; ValueError
        naming a bad escape."""
        import re

        text, out, i = self.delimiter, [], 0
        simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
        while i < len(text):
            if text[i] != "\\":
                out.append(text[i])
                i += 1
            elif text[i + 1:i + 2] in simple and text[i + 1:i + 2]:
                out.append(simple[text[i + 1]])
                i += 2
            elif text[i + 1:i + 2] == "x" and re.fullmatch("[0-9a-fA-F]{2}", text[i + 2:i + 4]):
                out.append(chr(int(text[i + 2:i + 4], 16)))
                i += 4
            else:
                raise ValueError(f"delimiter={self.delimiter}: unknown escape "
                                 f"{text[i:i + 2]} (use \\n, \\t, \\r, \\\\ or \\xHH)")
        return "".join(out)

    @classmethod
    def parse(cls, text: str | None) -> DecodeHParams:
        """The defaults overridden by "name=value,..." (values type-checked)."""
        defaults = cls()._settings()
        hp = HParams(**defaults)
        for part in (text or "").split(","):
            name = part.split("=", 1)[0].strip()
            if name and "=" in part and name not in defaults:
                matches = close_matches(name, defaults)
                hint = f" Did you mean: {', '.join(matches)}?" if matches else ""
                raise DecodeHParamsError(
                    f"Unknown decode hparam {name!r}.{hint} Known: {', '.join(defaults)}."
                )
        try:
            hp.parse(text or "")
        except HParamsError as e:
            raise DecodeHParamsError(f"--decode_hparams={text!r}: {e}") from None
        given = {part.split("=", 1)[0].strip() for part in (text or "").split(",")}
        if "beam_size" not in given and (hp.temperature > 0 or hp.num_samples > 1):
            hp.beam_size = 1  # sampling asked for: the default beam search does not apply
        given.discard("")
        result = cls(**hp.values(), given_keys=tuple(sorted(given & set(defaults))))
        result.validate()
        return result

    def validate(self) -> None:
        """DecodeHParamsError listing every out-of-range value."""
        checks = [
            (self.beam_size < 1, f"beam_size={self.beam_size} (need >= 1)"),
            (self.batch_size < 1, f"batch_size={self.batch_size} (need >= 1)"),
            (self.extra_length < 0, f"extra_length={self.extra_length} (need >= 0)"),
            (self.temperature < 0, f"temperature={self.temperature} (need >= 0)"),
            (self.top_k < 0, f"top_k={self.top_k} (need >= 0)"),
            (not 0.0 < self.top_p <= 1.0, f"top_p={self.top_p} (need 0 < top_p <= 1)"),
            (self.max_input_length < 0,
             f"max_input_length={self.max_input_length} (need >= 0)"),
            (self.temperature > 0 and self.beam_size > 1,
             "temperature > 0 samples, which needs beam_size=1"),
            (self.max_new_tokens < 0, f"max_new_tokens={self.max_new_tokens} (need >= 0)"),
            (self.num_samples < 1, f"num_samples={self.num_samples} (need >= 1)"),
            (self.num_samples > 1 and self.beam_size > 1,
             f"num_samples={self.num_samples} draws samples, which needs beam_size=1 (and "
             f"temperature > 0: greedy samples are all the same)"),
            (self.seed < -1, f"seed={self.seed} (need >= 0, or -1 for a random one)"),
            (self.shards < 1, f"shards={self.shards} (need >= 1)"),
            (self.shards >= 1 and not 0 <= self.shard_id < self.shards,
             f"shard_id={self.shard_id} (need 0 <= shard_id < shards={self.shards}: the "
             f"shards are numbered from 0)"),
            (self.num_decodes < 1, f"num_decodes={self.num_decodes} (need >= 1)"),
            (self.beam_search_rule not in BEAM_SEARCH_RULES,
             f"beam_search_rule={self.beam_search_rule!r} (use one of {BEAM_SEARCH_RULES})"),
        ]
        try:
            if not self.record_delimiter:
                checks.append((True, "delimiter='' (need a separator, e.g. \\n or ;)"))
        except ValueError as e:
            checks.append((True, str(e)))
        problems = [message for failed, message in checks if failed]
        if problems:
            raise DecodeHParamsError(f"Bad decode hparams: {'; '.join(problems)}.")

    def _settings(self) -> dict[str, Any]:
        """Every decode hparam and its value (given_keys is not one)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "given_keys"}

    def to_string(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self._settings().items())

    @classmethod
    def help_string(cls) -> str:
        """'name=default,...' of every decode hparam, for --decode_hparams' help."""
        return cls().to_string()


# -------------------------------------------------------------------- export
EXPORT_FORMATS = ("saved_model", "keras", "tflite", "ctranslate2")


@gin.configurable
@dataclasses.dataclass
class ExportConfig:
    """t2t-exporter: where the SavedModel goes and how it is checked."""

    export_dir: str | None = setting(None, "Where the versioned SavedModels go (default: "
                                     "OUTPUT_DIR/export).")
    skip_parity_check: bool = setting(False, "Do not verify the export against t2t's own "
                                      "decoding in a fresh process.")
    ids_only: bool = setting(False, "Leave out the text signature (no in-graph tokenizer): "
                             "serving_default is then the tf.Example signature.")
    parity_examples: int = setting(6, "Dev examples decoded by the parity check.", flag=False)
    format: str = setting("saved_model", "saved_model: TF Serving's SavedModel with the "
                          "decode signatures; keras: a .keras file of the model plus a "
                          "SavedModel for keras.layers.TFSMLayer (default EXPORT_DIR: "
                          "OUTPUT_DIR/export_keras); tflite: a LiteRT model (default "
                          "EXPORT_DIR: OUTPUT_DIR/export_tflite); ctranslate2: a CTranslate2 "
                          "model folder (default EXPORT_DIR: OUTPUT_DIR/export_ctranslate2; "
                          "--quantization).", choices=EXPORT_FORMATS)


# -------------------------------------------------------------------- tuning
@gin.configurable
@dataclasses.dataclass
class TunerConfig:
    """A hyperparameter study (t2t-tuner): what to tune, and how. `trainer_args` are given
    to every trial's trainer (the problem, model, hparams set, data dir, steps, ...; not
    --output_dir or --hparams); `direction` comes from --maximize/--minimize."""

    output_dir: str = setting("", "The study's directory.", flag=False)
    hparams_range: str = setting("", "Registered ranged hparams set: the search space, e.g. "
                                 "transformer_tiny_range (see --registry_help).")
    objective: str = setting("", "The eval metric to optimize, e.g. accuracy_per_sequence, "
                             "neg_log_perplexity, accuracy or loss (language models: "
                             "also perplexity and bits_per_byte).")
    hparams_set: str = setting("", "The hparams set every trial starts from.", flag=False)
    trainer_args: list[str] = setting([], "Flags of every trial's trainer.", flag=False)
    hparams: str = setting("", "The user's overrides; a trial's sampled values win.",
                           flag=False)
    direction: str = setting("maximize", "maximize or minimize the objective.", flag=False)
    num_trials: int = setting(10, "Stop when the study holds this many finished trials "
                              "(complete, pruned or failed; counted over all tuner "
                              "processes).")
    parallel_trials: int = setting(1, "Trials this process runs at once.")
    sampler: str = setting("tpe", "How trials pick values: TPE, CMA-ES (float/int ranges; "
                           "needs the cmaes package) or random.", choices=SAMPLERS)
    seed: int = setting(0, "Seed of the sampler (trial N uses seed + N).", flag="sampler_seed")
    study_name: str | None = setting(None, "Default: PROBLEM-MODEL-HPARAMS_SET-HPARAMS_RANGE-"
                                     "OBJECTIVE.")
    storage: str | None = setting(None, "Where the study lives: default sqlite:///OUTPUT_DIR/"
                                  "study.db (one host); for many hosts a database all reach, "
                                  "e.g. postgresql://user:password@host/db.")
    pruning: bool = setting(True, "Stop trials whose evaluations fall below the median of "
                            "earlier trials at the same step (Optuna's MedianPruner).")
    pruning_startup_trials: int = setting(3, "Complete trials before pruning starts.")
    heartbeat_seconds: int = setting(10, "Trials of a dead tuner are re-run after 3 "
                                     "heartbeats.")
    poll_seconds: float = setting(2.0, "How often a running trial's evaluations are read.",
                                  flag=False)
    trainer_command: list[str] | None = setting(None, "The trainer each trial runs (default: "
                                                "python -m t2t.bin.t2t_trainer).", flag=False)

    def storage_url(self) -> str:
        import os

        return self.storage or "sqlite:///" + os.path.abspath(
            os.path.join(self.output_dir, "study.db"))


# Fields that moved between configs: gin bindings of the old names are translated
# (with a warning) by t2t.gin_config, so existing gin files keep working.
MOVED_SETTINGS = {
    f"TrainerConfig.{name}": f"RuntimeConfig.{name}"
    for name in ("xla_compile", "mixed_precision", "deterministic", "random_seed")
}

CONFIGS = (TaskConfig, DataConfig, TrainerConfig, RuntimeConfig, InputConfig, DecodeHParams,
           ExportConfig, TunerConfig)
