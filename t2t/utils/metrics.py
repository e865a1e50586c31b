"""Tensor2Tensor's metric names (`metrics.Metrics`) and what each is in t2t.

A problem's `eval_metrics()` may return T2T's names; `canonical_metric_names` turns
them into t2t's (t2t.trainer.metrics computes those), and names the T2T metrics t2t
does not compute, with what to use instead. No TensorFlow here: problems import it.
"""

from __future__ import annotations

from collections.abc import Iterable


class Metrics:
    """Tensor2Tensor's metric names (v1.15), with its string values."""

    ACC = "accuracy"
    ACC_TOP5 = "accuracy_top5"
    ACC_PER_SEQ = "accuracy_per_sequence"
    ACC_MULTILABEL_MATCH3 = "accuracy_multilabel_match3"
    NEG_LOG_PERPLEXITY = "neg_log_perplexity"
    MASKED_NEG_LOG_PERPLEXITY = "masked_neg_log_perplexity"
    APPROX_BLEU = "approx_bleu_score"
    APPROX_SARI = "approx_sari_score"
    RMSE = "rmse"
    UNPADDED_MSE = "unpadded_mse"
    LOG_POISSON = "log_poisson"
    PEARSON = "pearson"
    R2 = "r_squared"
    ROUGE_2_F = "rouge_2_fscore"
    ROUGE_L_F = "rouge_L_fscore"
    EDIT_DISTANCE = "edit_distance"
    WORD_ERROR_RATE = "word_error_rate"
    SOFTMAX_CROSS_ENTROPY_ONE_HOT = "softmax_cross_entropy_one_hot"
    SIGMOID_ACCURACY_ONE_HOT = "sigmoid_accuracy_one_hot"
    SIGMOID_RECALL_ONE_HOT = "sigmoid_recall_one_hot"
    SIGMOID_PRECISION_ONE_HOT = "sigmoid_precision_one_hot"
    SIGMOID_CROSS_ENTROPY_ONE_HOT = "sigmoid_cross_entropy_one_hot"
    TWO_CLASS_ACCURACY = "two_class_accuracy"
    TWO_CLASS_LOG_LIKELIHOOD = "two_class_log_likelihood"
    SET_PRECISION = "set_precision"
    SET_RECALL = "set_recall"
    IMAGE_SUMMARY = "image_summary"
    DMOL_PERPLEXITY = "disc_mol_neg_log_perplexity"
    ABS_ERR = "mean_absolute_error"
    IMAGE_RMSE = "image_rmse"


# T2T name -> t2t name where t2t computes it (the same name where they agree). T2T's
# approx_bleu_score was BLEU of the teacher-forced argmax; t2t's "bleu" decodes the dev
# examples greedily and scores them with sacrebleu, which is the figure users quote.
# ROUGE and WER likewise come from greedy decodes.
T2T_TO_T2T = {
    Metrics.ACC: "accuracy",
    Metrics.ACC_TOP5: "accuracy_top5",
    Metrics.ACC_PER_SEQ: "accuracy_per_sequence",
    Metrics.NEG_LOG_PERPLEXITY: "neg_log_perplexity",
    Metrics.APPROX_BLEU: "bleu",
    Metrics.ROUGE_2_F: "rouge_2",
    Metrics.ROUGE_L_F: "rouge_l",
    Metrics.WORD_ERROR_RATE: "wer",
    Metrics.RMSE: "rmse",
    Metrics.ABS_ERR: "mean_absolute_error",
}
# T2T names t2t accepts and drops, with why.
DROPPED = {
    Metrics.IMAGE_SUMMARY: "t2t writes sampled images of image-target models at each "
                           "evaluation itself (t2t.trainer.image_summaries)",
}
_INSTEAD = {
    Metrics.EDIT_DISTANCE: "'cer' (character error rate of greedy decodes) or 'wer'",
    Metrics.APPROX_SARI: "'bleu' (decoded) or score SARI offline on t2t-decoder's output",
    Metrics.MASKED_NEG_LOG_PERPLEXITY: "'neg_log_perplexity' (padding is always masked)",
    Metrics.IMAGE_RMSE: "'rmse' on real-valued targets",
    Metrics.UNPADDED_MSE: "'rmse' (its square is the mean squared error)",
}


class UnsupportedMetricError(ValueError):
    """A Tensor2Tensor metric t2t does not compute."""


def canonical_metric_names(names: Iterable[str], problem_name: str = "problem") -> list[str]:
    """t2t's names for `names` (T2T's mapped, image_summary dropped, others unchanged);
    UnsupportedMetricError for a T2T metric t2t does not compute, saying what to use."""
    t2t_only = {v for k, v in vars(Metrics).items() if k.isupper()} - set(T2T_TO_T2T) - set(DROPPED)
    out: list[str] = []
    for name in names:
        if name in DROPPED:
            continue
        if name in t2t_only:
            instead = _INSTEAD.get(name, "one of " + ", ".join(sorted(set(T2T_TO_T2T))))
            raise UnsupportedMetricError(
                f"{problem_name}: eval metric {name!r} (Tensor2Tensor's) is not computed "
                f"by t2t; use {instead}.")
        mapped = T2T_TO_T2T.get(name, name)
        if mapped not in out:
            out.append(mapped)
    return out
