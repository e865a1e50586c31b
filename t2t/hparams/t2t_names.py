"""Tensor2Tensor's hparam names that t2t maps to its own settings or does not implement.

One table, `T2T_HPARAMS`, read by:
- HParams (t2t.hparams.hparams): a name t2t lacks, added by a set (`hp.name = value`,
  `add_hparam`, `set_hparam`) or by `--hparams`, is accepted at T2T's default value
  (which means "off"); any other value is refused (an HParamsError) when it changes what
  T2T trained, or accepted with one warning line when it only changed speed, memory or
  logging. Both lines say what to use instead. Reading a missing name says the same.
- the trainer: `activation_dtype` selects mixed precision (`mixed_precision`).
- the docs: `python -m t2t.hparams.t2t_names --write docs/how-to/coming-from-t2t.md` (or `python -m docsite reference`) writes the table
  between its t2t-hparams markers.

Names of Tensor2Tensor v1.15's basic_params1 and transformer_base_v1 that t2t's sets
keep with the same meaning are not listed; nor are the mixture-of-experts names, which
t2t's transformer_moe sets keep, nor T2T's per-feature function tables (bottom, top,
loss, weights_fn, name), which only T2T model code used: port such code as a T2TModel.

Imports nothing from t2t but t2t.hparams.errors (HParams imports this module).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any

from t2t.hparams.errors import HParamsError

MAPPED = "mapped"  # t2t's sets keep the name; `use` says how t2t applies it
IGNORED = "ignored"  # T2T: speed, memory or logging only; another value: a warning
REFUSED = "refused"  # T2T: what is trained; another value: an HParamsError
KINDS = (MAPPED, IGNORED, REFUSED)


@dataclasses.dataclass(frozen=True)
class T2THParam:
    """What t2t does with one Tensor2Tensor hparam.

    kind: MAPPED, IGNORED or REFUSED (see the module docstring).
    use: what t2t does instead, or what to use.
    t2t_default: Tensor2Tensor's default (v1.15), accepted silently (it means "off").
    """

    kind: str
    use: str
    t2t_default: Any = None


def _ignored(use: str, t2t_default: Any) -> T2THParam:
    return T2THParam(IGNORED, use, t2t_default)


def _refused(use: str, t2t_default: Any) -> T2THParam:
    return T2THParam(REFUSED, use, t2t_default)


_NO_AREA = "t2t has no area attention"
_NO_SCHEDULED_SAMPLING = "t2t trains with teacher forcing only (no scheduled sampling)"
_NO_SPLIT = "split long examples when the problem generates its data"
_MULTI = ("t2t's multi-problems (t2t.data.multi_problem) share one vocabulary and "
          "weigh every task's loss alike; mix them with multiproblem_mixing_schedule")
_DROPOUT_DIMS = "t2t draws one dropout mask entry per element"
_FEED_FORWARD = "t2t's ffn_layer is dense_relu_dense"
_PRECISION = ("compute in 16 bits with activation_dtype=bfloat16/float16 or "
              "--mixed_precision")

# Tensor2Tensor v1.15's basic_params1 and transformer_base_v1 (and T2T <= 1.10's
# modality names) that t2t renamed, maps or lacks.
T2T_HPARAMS: dict[str, T2THParam] = {
    "activation_dtype": T2THParam(
        MAPPED, "bfloat16 / float16 train in mixed precision as --mixed_precision=bfloat16 "
        "/ float16 do (when that flag is not given; a different one is an error); "
        "weights stay float32", "float32"),
    "add_relative_to_values": _refused(
        "t2t's dot_product_relative attention adds relative embeddings to keys and "
        "values always", False),
    "area_key_mode": _refused(_NO_AREA, "none"),
    "area_value_mode": _refused(_NO_AREA, "none"),
    "attention_dropout_broadcast_dims": _ignored(_DROPOUT_DIMS, ""),
    "attention_variables_3d": _ignored("nothing to set: variable layout only", False),
    "causal_decoder_self_attention": _refused(
        "t2t's decoder self-attention is always causal (the encoder is the "
        "bidirectional part)", True),
    "compress_steps": _ignored("nothing to set: only T2T's research models read it", 0),
    "conv_first_kernel": _ignored(_FEED_FORWARD, 3),
    "daisy_chain_variables": _ignored(
        "nothing to set: tf.distribute keeps the replicas' variables in sync", True),
    "eval_run_autoregressive": T2THParam(
        MAPPED, "true: each evaluation also decodes every example it reads greedily and "
        "reports decoded/accuracy and decoded/accuracy_per_sequence", False),
    "factored_logits": _ignored("nothing to set: t2t computes the whole softmax (memory "
                                "only)", False),
    "force_full_predict": _ignored(
        "nothing to set: t2t's decoders run the model's cached step function", False),
    "gpu_automatic_mixed_precision": _refused(
        "give --mixed_precision=float16 (or activation_dtype=float16)", False),
    "grad_noise_scale": _refused("t2t adds no gradient noise", 0.0),
    "gumbel_noise_weight": _ignored("t2t has no hard attention (hard_attention_k)", 0.0),
    "hard_attention_k": _refused("t2t has no hard attention", 0),
    "heads_share_relative_embedding": _refused(
        "t2t's relative embeddings are one table shared by all heads", False),
    "input_modalities": _refused(
        "the problem's hparams set the modalities (T2T <= 1.10's name)", "default"),
    "layer_prepostprocess_dropout_broadcast_dims": _ignored(_DROPOUT_DIMS, ""),
    "learning_rate_minimum": _ignored(
        "T2T v1.15 read it nowhere either; the learning_rate_schedule sets the last rate",
        None),
    "max_area_height": _ignored(_NO_AREA, 1),
    "max_area_width": _ignored(_NO_AREA, 1),
    "max_input_seq_length": T2THParam(
        MAPPED, "as in T2T: inputs are cut to this many ids when read (0: no cut)", 0),
    "max_target_seq_length": T2THParam(
        MAPPED, "as in T2T: targets are cut to this many ids when read (0: no cut)", 0),
    "memory_height": _ignored(_NO_AREA, 1),
    "mixed_precision_optimizer_loss_scaler": _ignored(
        "nothing to set: float16 training scales the loss dynamically (initial scale "
        "mixed_precision_optimizer_init_loss_scale)", "exponential"),
    "mlperf_mode": _ignored("nothing to set: t2t writes no MLPerf logs", False),
    "moe_overhead_eval": _ignored(_FEED_FORWARD + " (transformer_moe: moe_* hparams)", 2.0),
    "moe_overhead_train": _ignored(_FEED_FORWARD + " (transformer_moe: moe_* hparams)",
                                   1.0),
    "multiproblem_fixed_train_length": _refused(_MULTI, -1),
    "multiproblem_label_weight": _ignored(_MULTI, 0.5),
    "multiproblem_max_input_length": _refused(_MULTI, -1),
    "multiproblem_max_target_length": _refused(_MULTI, -1),
    "multiproblem_reweight_label_loss": _refused(_MULTI, False),
    "multiproblem_schedule_threshold": _refused(
        "use multiproblem_per_task_threshold ('3;1': constant weights per task)", 0.5),
    "multiproblem_target_eval_only": _refused(
        "every task's dev split is evaluated on its own", False),
    "multiproblem_vocab_size": _refused(_MULTI, -1),
    "nbr_decoder_problems": _ignored("nothing to set: one decoder per model", 1),
    "no_data_parallelism": _ignored(
        "for model parallelism use mesh_shape and layout (a DTensor mesh)", False),
    "num_area_layers": _refused(_NO_AREA, 0),
    "optimizer_zero_grads": _ignored(
        "nothing to set: the optimizer's slots are built for every variable at start",
        False),
    "overload_eval_metric_name": _ignored(
        "nothing to set: results are named after the metric (eval_results.jsonl)", ""),
    "pad_batch": _ignored("nothing to set: TPU runs get static batch shapes", False),
    "parameter_attention_key_channels": _ignored(_FEED_FORWARD, 0),
    "parameter_attention_value_channels": _ignored(_FEED_FORWARD, 0),
    "prepend_mode": _refused(
        "to train on inputs + targets as one sequence, make the problem a Text2Self "
        "problem", "none"),
    "pretrained_model_dir": _refused("give t2t-trainer --warm_start_from=DIR", ""),
    "relu_dropout_broadcast_dims": _ignored(_DROPOUT_DIMS, ""),
    "sampling_keep_top_k": T2THParam(
        MAPPED, "decoding samples among the k most likely tokens (<= 0: all); "
        "--decode_hparams=top_k=N wins", -1),
    "sampling_method": T2THParam(
        MAPPED, "random: decoding (t2t-decoder, exports) samples at sampling_temp with one "
        "beam, unless --decode_hparams gives beam_size (then beam search, as in T2T) or "
        "temperature (which wins)", "argmax"),
    "sampling_temp": T2THParam(
        MAPPED, "the temperature sampling_method=random samples at (0: greedy); "
        "--decode_hparams=temperature=T wins", 1.0),
    "scheduled_sampling_gold_mixin_prob": _ignored(_NO_SCHEDULED_SAMPLING, 0.5),
    "scheduled_sampling_method": _ignored(_NO_SCHEDULED_SAMPLING, "parallel"),
    "scheduled_sampling_num_passes": _ignored(_NO_SCHEDULED_SAMPLING, 1),
    "scheduled_sampling_prob": _refused(_NO_SCHEDULED_SAMPLING, 0.0),
    "scheduled_sampling_warmup_schedule": _ignored(_NO_SCHEDULED_SAMPLING, "exp"),
    "scheduled_sampling_warmup_steps": _ignored(_NO_SCHEDULED_SAMPLING, 50000),
    "split_targets_chunk_length": _refused(_NO_SPLIT, 0),
    "split_targets_max_chunks": _ignored(_NO_SPLIT, 100),
    "split_targets_strided_training": _refused(_NO_SPLIT, False),
    "split_to_length": _refused(_NO_SPLIT, 0),
    "summarize_grads": _ignored(
        "nothing to set: TensorBoard gets gradient norms per layer (gin "
        "TrainerConfig.layer_summaries, on by default)", False),
    "summarize_vars": _ignored(
        "nothing to set: TensorBoard gets parameter norms per layer (gin "
        "TrainerConfig.layer_summaries)", False),
    "symbol_modality_num_shards": _ignored(
        "nothing to set: an embedding is one variable (--ps_min_shard_bytes splits "
        "variables over parameter servers)", 1),
    "target_modality": _refused(
        "the problem's hparams set the modalities (T2T <= 1.10's name)", "default"),
    "tpu_enable_host_call": _ignored(
        "nothing to set: summaries are written every --log_every_steps", False),
    "unidirectional_encoder": _refused("t2t's encoder self-attention sees every position",
                                       False),
    "use_custom_ops": _ignored("nothing to set: t2t uses TensorFlow's ops only", True),
    "use_pad_remover": _ignored("nothing to set: padding is masked", True),
    "video_num_input_frames": _refused("t2t has no video problems", 1),
    "video_num_target_frames": _refused("t2t has no video problems", 1),
    "vocab_divisor": _ignored("nothing to set: vocabularies keep their size", 1),
    "warm_start_from_second": _refused(
        "t2t-trainer --warm_start_from loads one checkpoint", ""),
    "weight_dtype": T2THParam(
        MAPPED, "float32 only: t2t keeps float32 master weights; " + _PRECISION, "float32"),
    "weight_noise": _refused("t2t adds no weight noise", 0.0),
}


def note(name: str) -> str | None:
    """"Tensor2Tensor's hparam NAME is not in t2t: USE." for a T2T name t2t lacks."""
    entry = T2T_HPARAMS.get(name)
    if entry is None or entry.kind == MAPPED:
        return None
    return f"Tensor2Tensor's hparam {name!r} is not in t2t: {entry.use}."


def check_value(name: str, value: Any) -> tuple[str, str] | None:
    """(kind, one-line message) when `value` for `name`, a T2T name t2t lacks, must be
    refused (REFUSED) or warned about (IGNORED); None when it is T2T's default (or
    `name` is not such a name)."""
    entry = T2T_HPARAMS.get(name)
    if entry is None or entry.kind == MAPPED or _same(value, entry.t2t_default):
        return None
    if entry.kind == REFUSED:
        return REFUSED, (f"hparam {name}={value!r} is Tensor2Tensor's and not in t2t: "
                         f"{entry.use}. Leave it at {entry.t2t_default!r} or drop it.")
    return IGNORED, (f"hparam {name}={value!r} is Tensor2Tensor's; t2t ignores it: "
                     f"{entry.use}.")


def _same(value: Any, default: Any) -> bool:
    if isinstance(default, str) and isinstance(value, str):
        return value.lower() == default.lower()
    return value == default and isinstance(value, bool) == isinstance(default, bool)


PRECISIONS = {"float32": None, "bfloat16": "bfloat16", "float16": "float16"}


def mixed_precision(hparams: Any, flag_value: str | None) -> str | None:
    """The run's mixed precision ("bfloat16", "float16" or None: float32): the
    --mixed_precision flag's `flag_value`, else what `hparams.activation_dtype` names
    (Tensor2Tensor's way). HParamsError for a bad activation_dtype or weight_dtype, or an
    activation_dtype the flag contradicts."""
    activation = hparams.activation_dtype
    if activation not in PRECISIONS:
        raise HParamsError(f"hparam activation_dtype={activation!r}: use one of "
                           f"{', '.join(PRECISIONS)}.")
    if hparams.weight_dtype != "float32":
        raise HParamsError(f"hparam weight_dtype={hparams.weight_dtype!r}: t2t keeps float32 "
                           f"master weights; set weight_dtype=float32 and {_PRECISION}.")
    wanted = PRECISIONS[activation]
    if flag_value and wanted and flag_value != wanted:
        raise HParamsError(f"--mixed_precision={flag_value} contradicts hparam "
                           f"activation_dtype={activation!r}: give one of them (or the same "
                           f"precision in both).")
    return flag_value or wanted


# readme_tables.markers("t2t-hparams"), written out: this module imports nothing from t2t.
BEGIN = "<!-- t2t-hparams:begin -->"
END = "<!-- t2t-hparams:end -->"


_CODE = re.compile(r"((?:t2t-[a-z-]+ )?--\w+(?:=[\w,.:/=]+)?)")


def _cell(entry: T2THParam) -> str:
    default = f"`{entry.t2t_default!r}`"
    use = _CODE.sub(r"`\1`", entry.use)
    if entry.kind == MAPPED:
        return f"applied: {use}"
    if entry.kind == REFUSED:
        return f"not in t2t; a value other than {default} is an error: {use}"
    return f"not in t2t; a value other than {default} is ignored with a warning: {use}"


def markdown_table() -> str:
    """The README table of `T2T_HPARAMS`: each T2T hparam and what t2t does with it."""
    rows = ["| Tensor2Tensor hparam | In t2t |", "|---|---|"]
    rows += [f"| `{name}` | {_cell(entry)} |" for name, entry in sorted(T2T_HPARAMS.items())]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Prints the table, or with --write FILE puts it between FILE's markers."""
    from t2t.utils import readme_tables

    return readme_tables.run_cli(argv, "The table of Tensor2Tensor hparams that t2t maps "
                                 "or lacks.", markdown_table, BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
