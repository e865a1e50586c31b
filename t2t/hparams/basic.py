"""The basic hyperparameter set every model's set starts from.

Names and values follow Tensor2Tensor's `common_hparams.basic_params1` (v1.15), for
the hyperparameters t2t implements; options of T2T features t2t does not have (mixture
of experts, multi-problem schedules, video, ...) are left out rather than kept as
settings that do nothing: given anyway, t2t.hparams.t2t_names refuses them, or warns,
saying what to use instead.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.hparams import HParams
from t2t.hparams.ranged import LOG_SCALE, RangedHParams


@registry.register_hparams
def basic_params1() -> HParams:
    """Defaults shared by all models (Tensor2Tensor's basic_params1)."""
    return HParams(
        # Batching: tokens per replica for text problems, examples for the others.
        batch_size=4096,
        batch_shuffle_size=512,
        use_fixed_batch_size=False,
        # Model size (each model reads what applies to it).
        num_hidden_layers=4,
        kernel_height=3, kernel_width=1,
        hidden_size=64,
        dropout=0.2,
        # Optimization.
        clip_grad_norm=2.0,  # global norm; 0 disables clipping
        initializer="orthogonal",
        initializer_gain=1.5,
        label_smoothing=0.1,
        optimizer="adam",
        optimizer_adam_epsilon=1e-6,
        optimizer_adam_beta1=0.85,
        optimizer_adam_beta2=0.997,
        optimizer_momentum_momentum=0.9, optimizer_momentum_nesterov=False,
        optimizer_adafactor_beta1=0.0, optimizer_adafactor_beta2=0.999,
        optimizer_adafactor_factored=True,
        optimizer_adafactor_decay_type="pow",
        optimizer_adafactor_memory_exponent=0.8,
        optimizer_adafactor_clipping_threshold=1.0,
        optimizer_adafactor_multiply_by_parameter_scale=True,
        weight_decay=1e-6,
        optimizer_multistep_accumulate_steps=0,  # micro-batches per update (0/1: none)
        # Learning rate: the product of the factors named in learning_rate_schedule.
        learning_rate_schedule="legacy",
        learning_rate_constant=1.0,
        learning_rate_decay_scheme="none",
        learning_rate_decay_steps=5000, learning_rate_decay_staircase=False,
        learning_rate_decay_rate=1.0,
        learning_rate_warmup_steps=100,
        learning_rate_warmup_schedule="exp",  # legacy schedule's warmup: "exp" or "linear"
        learning_rate_cosine_cycle_steps=250000,
        learning_rate=0.1,
        # Decoding defaults.
        sampling_method="argmax",  # "argmax" or "random"
        sampling_temp=1.0,
        sampling_keep_top_k=-1,
        # Embeddings and layer structure.
        multiply_embedding_mode="sqrt_depth",
        layer_preprocess_sequence="none",
        layer_postprocess_sequence="dan",  # d=dropout, a=add residual, n=norm
        layer_prepostprocess_dropout=0.1,
        symbol_dropout=0.0,
        norm_type="layer",  # "layer", "batch", "none"
        norm_epsilon=1e-6,
        shared_embedding_and_softmax_weights=False, shared_embedding=False,
        # Lengths and the input pipeline.
        min_length=0, max_length=0,  # max_length 0: use batch_size
        max_input_seq_length=0, max_target_seq_length=0,  # 0: no truncation
        pack_dataset=False,
        min_length_bucket=8, length_bucket_step=1.1,
        eval_drop_long_sequences=False,
        eval_run_autoregressive=False,
        # Subword regularization (Kudo 2018; t2t.data.pipeline.subword_sampling): each time a
        # TRAIN example is read, its SentencePiece text is segmented anew by sampling
        # (alpha: 0 off, e.g. 0.1); eval and decoding keep the best segmentation.
        # nbest -1: from the whole lattice, fast, but tensorflow_text's sampler takes no
        # seed (differs run to run); N > 1: among the N best, seeded (runs repeat).
        subword_sampling_alpha=0.0,
        subword_sampling_nbest=-1,
        # Multi-problems (t2t.data.multi_problem; Tensor2Tensor's names): how the
        # tasks' train examples are mixed, "constant" | "proportional" | "pretrain".
        multiproblem_mixing_schedule="constant",
        multiproblem_per_task_threshold="",  # "3;1": constant weights per task; "": equal
        multiproblem_schedule_max_examples=10_000_000,  # pretrain: primary task's examples
        distill_temperature=1.0, distill_weight=0.5,  # --teacher_dir: t2t.trainer.distillation
        mesh_shape="", layout="",  # model parallelism, Mesh TensorFlow's (t2t.parallel)
        # Numerics. activation_dtype bfloat16/float16: mixed precision (t2t.hparams.t2t_names)
        activation_dtype="float32", weight_dtype="float32",  # weights stay float32
        mixed_precision_optimizer_init_loss_scale=2**15,  # float16 loss scaling
    )


registry.register_hparams(basic_params1, name="basic_1")  # Tensor2Tensor's registered name


@registry.register_ranged_hparams
def basic_range1(rhp: RangedHParams) -> None:
    """A broad search space over basic_params1 (Tensor2Tensor's basic_range1)."""
    rhp.set_discrete("batch_size", [1024, 2048, 4096])
    rhp.set_discrete("num_hidden_layers", [1, 2, 3, 4, 5, 6])
    rhp.set_discrete("hidden_size", [32, 64, 128, 256, 512], scale=LOG_SCALE)
    rhp.set_discrete("kernel_height", [1, 3, 5, 7])
    rhp.set_discrete("kernel_width", [1, 3, 5, 7])
    rhp.set_float("dropout", 0.0, 0.5)
    rhp.set_float("weight_decay", 1e-4, 10.0, scale=LOG_SCALE)
    rhp.set_float("label_smoothing", 0.0, 0.2)
    rhp.set_float("clip_grad_norm", 0.01, 50.0, scale=LOG_SCALE)
    rhp.set_float("learning_rate", 0.005, 2.0, scale=LOG_SCALE)
    rhp.set_categorical("initializer", ["uniform", "orthogonal", "uniform_unit_scaling"])
    rhp.set_float("initializer_gain", 0.5, 3.5)
    rhp.set_categorical("learning_rate_decay_scheme", ["none", "sqrt", "noam", "exp"])
    rhp.set_float("optimizer_adam_epsilon", 1e-7, 1e-2, scale=LOG_SCALE)
    rhp.set_float("optimizer_adam_beta1", 0.8, 0.9)
    rhp.set_float("optimizer_adam_beta2", 0.995, 0.999)
    rhp.set_categorical("optimizer", ["adam", "sgd", "momentum", "adafactor"])


def create_hparams(hparams_set: str, overrides: str = "") -> HParams:
    """The registered set `hparams_set` with `overrides` ("a=1,b=2") applied."""
    hparams = registry.hparams(hparams_set)()
    if not isinstance(hparams, HParams):
        raise TypeError(
            f"hparams set {hparams_set!r} returned {type(hparams).__name__}, not HParams."
        )
    return hparams.parse(overrides)
