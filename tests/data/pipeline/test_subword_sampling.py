"""Tests for t2t.data.pipeline.subword_sampling: TRAIN examples segmented anew by sampling
(same text, control ids and user-defined symbols where they were), the best
segmentation reproducing t2t-datagen's ids, seeded n-best draws, evaluation and
decoding untouched, refusals, and a real training run with sampling on.

The problem is a text-to-text task on real English (the standard library's docstring
sentences), with a small SentencePiece vocabulary and one user-defined symbol."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from t2t.config import InputConfig, RuntimeConfig, TrainerConfig
from t2t.data import problem as problem_lib
from t2t.data.bases import text_problems
from t2t.data.encoders.sentencepiece_encoder import SentencePieceEncoder
from t2t.data.pipeline import input_pipeline
from t2t.data.pipeline import subword_sampling as ss
from t2t.decoding.decoder import Decoder
from t2t.hparams.basic import create_hparams
from t2t.hparams.hparams import HParamsError
from t2t.problems.text import sentences
from t2t.trainer.trainer import Trainer

SEP = "<sep>"  # an additional reserved token: a SentencePiece user-defined symbol
TRAIN_PAIRS, DEV_PAIRS = 500, 40


class DocstringReversal(text_problems.Text2TextProblem):
    """Docstring sentences -> their words reversed, "<sep>" between the halves."""

    approx_vocab_size = 400
    additional_reserved_tokens = (SEP,)

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        held_out = dataset_split != problem_lib.TRAIN_SPLIT
        text = [s for s in sentences.docstring_sentences() if sentences.held_out(s) == held_out]
        for sentence in text[: DEV_PAIRS if held_out else TRAIN_PAIRS]:
            words = sentence.split()[::-1]
            half = len(words) // 2
            yield {"inputs": sentence, "targets": " ".join(words[:half] + [SEP] + words[half:])}


class DocstringReversalBytes(DocstringReversal):
    vocab_type = text_problems.VOCAB_BYTE


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("data"))
    problem = DocstringReversal()
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    return problem, data_dir


def sampling(alpha, nbest=-1, base="transformer_test", extra=""):
    overrides = f"subword_sampling_alpha={alpha},subword_sampling_nbest={nbest}"
    return create_hparams(base, ",".join(o for o in (overrides, extra) if o))


def stored(problem, data_dir, mode=problem_lib.TRAIN):
    """The examples as t2t-datagen wrote them, in file order: [(inputs, targets)]."""
    dataset = problem.dataset(mode, data_dir, shuffle_files=False, deterministic=True)
    return [(tuple(ex["inputs"].tolist()), tuple(ex["targets"].tolist()))
            for ex in dataset.as_numpy_iterator()]


def resampled(problem, data_dir, hparams, epochs, seed=None):
    dataset = problem.dataset(problem_lib.TRAIN, data_dir, shuffle_files=False, deterministic=True)
    out = ss.resample_dataset(dataset.repeat(epochs), problem, data_dir, hparams, seed)
    assert out.element_spec == dataset.element_spec  # Tensors [None], as padded_batch needs
    return [(tuple(ex["inputs"].tolist()), tuple(ex["targets"].tolist()))
            for ex in out.as_numpy_iterator()]


def text_of(encoder, ids):
    """The text between control ids, and where the control ids are (from the end)."""
    ids = list(ids)
    control = [(len(ids) - i, t) for i, t in enumerate(ids) if t in (0, 1)]
    return encoder.decode([t for t in ids if t > 1]), control


def test_the_best_segmentation_gives_the_stored_ids(data):
    problem, data_dir = data
    encoder = problem.feature_encoders(data_dir)["targets"]
    best = ss.SegmentResampler(encoder.model_proto, ss.SamplingSettings(0.0))
    examples = stored(problem, data_dir)
    assert encoder.decode_list([3]) == [SEP]
    assert all(t.count(3) == 1 and t[-1] == 1 for _, t in examples)
    # Tensor2Tensor's prepend_inputs_to_targets layout too: inputs EOS PAD targets EOS.
    rows = [list(i) for i, _ in examples] + [list(t) for _, t in examples]
    rows += [list(i) + [0] + list(t) for i, t in examples[:50]] + [[]]
    out = best(tf.ragged.constant(rows, dtype=tf.int32)).to_list()
    assert out == rows
    # One example (rank-1 features, inputs only) through resample_fn's callable.
    fn = ss.resample_fn(problem, data_dir, sampling(0.3, nbest=4))
    one = fn({"inputs": tf.constant(examples[0][0], tf.int32)}, tf.constant([1, 2], tf.int64))
    assert one["inputs"].shape.rank == 1
    assert text_of(encoder, one["inputs"].numpy()) == text_of(encoder, examples[0][0])


def test_sampling_segments_anew_each_epoch_keeping_the_text(data):
    problem, data_dir = data
    encoder = problem.feature_encoders(data_dir)["targets"]
    examples = stored(problem, data_dir)
    read = resampled(problem, data_dir, sampling(0.2), epochs=2)
    first, second = read[: len(examples)], read[len(examples):]
    assert len(second) == len(examples)
    changed_between_epochs = 0
    for original, a, b in zip(examples, first, second, strict=True):
        for feature in range(2):
            # The same text, EOS last, <sep> once: only the segmentation changed.
            assert text_of(encoder, a[feature]) == text_of(encoder, original[feature])
            assert text_of(encoder, b[feature]) == text_of(encoder, original[feature])
            assert max(a[feature]) < encoder.vocab_size and min(a[feature]) > 0
            changed_between_epochs += a[feature] != b[feature]
        assert a[1].count(3) == 1
    # Drawn anew each epoch: as often changed as two independent draws of the sampler
    # (how often depends on the model: SentencePiece 0.2.2, which TF 2.19 pins, trains a
    # peakier one: 30% of the features changed at alpha 0.2 there, 95% with 0.2.3+).
    sampler = ss.SegmentResampler(encoder.model_proto, ss.SamplingSettings(0.2))
    rows = tf.ragged.constant([list(f) for pair in examples for f in pair], dtype=tf.int32)
    draws = sampler(rows).to_list(), sampler(rows).to_list()
    independent = sum(x != y for x, y in zip(*draws, strict=True))
    assert independent > 0.2 * len(draws[0]), independent  # sampling does change segmentations
    assert changed_between_epochs > 0.7 * independent, (changed_between_epochs, independent)
    assert sum(len(a) + len(b) for a, b in first) > sum(len(a) + len(b) for a, b in examples)


@pytest.mark.slow  # ~22 s; CI keeps sampling while training and the stored ids
def test_nbest_draws_repeat_with_the_seed(data):
    problem, data_dir = data
    hparams = sampling(0.5, nbest=4)
    examples = stored(problem, data_dir)[:200]
    dataset = problem.dataset(problem_lib.TRAIN, data_dir, shuffle_files=False,
                              deterministic=True).take(200)

    def read(seed):
        out = ss.resample_dataset(dataset, problem, data_dir, hparams, seed)
        return [ex["inputs"].tolist() for ex in out.as_numpy_iterator()]

    seeded = read(7)
    assert read(7) == seeded and read(8) != seeded
    changed = sum(list(s) != list(i) for s, (i, _) in zip(seeded, examples, strict=True))
    assert changed > 40, changed  # the best of 4 keeps about 2 in 3 here
    # Through the TRAIN pipeline: a seeded, deterministic config gives the same batches.
    config = InputConfig(seed=3, deterministic=True)
    hparams.batch_size = 256  # a window of 1024 examples before the first batch

    def batches():
        dataset_fn = input_pipeline.make_input_fn(problem, problem_lib.TRAIN, data_dir, hparams,
                                                  config)
        return [b["targets"].numpy() for b in dataset_fn().take(3)]

    first = batches()
    for a, b in zip(first, batches(), strict=True):
        np.testing.assert_array_equal(a, b)
    rows = [tuple(row[row > 0].tolist()) for batch in first for row in batch]
    unstored = set(rows) - {t for _, t in stored(problem, data_dir)}
    assert len(unstored) > len(rows) / 4, (len(unstored), len(rows))


def test_evaluation_reads_the_stored_ids(data):
    problem, data_dir = data
    assert ss.resample_fn(problem, data_dir, sampling(0.0)) is None

    def eval_batches(hparams):
        dataset_fn = input_pipeline.make_input_fn(problem, problem_lib.EVAL, data_dir, hparams,
                                                  InputConfig(deterministic=True))
        return [{k: v.numpy() for k, v in b.items()} for b in dataset_fn()]

    plain, sampled = eval_batches(sampling(0.0)), eval_batches(sampling(0.5))
    assert len(plain) == len(sampled) and plain
    for a, b in zip(plain, sampled, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    rows = collections.Counter(tuple(r[r > 0].tolist()) for b in sampled for r in b["inputs"])
    assert rows == collections.Counter(i for i, _ in stored(problem, data_dir, problem_lib.EVAL))


def test_refusals_name_the_vocabulary_and_the_fix(data, tmp_path):
    problem, data_dir = data
    with pytest.raises(ss.SubwordSamplingError,
                       match=r"'byte' vocabulary.*subword_sampling_alpha=0.1 needs a "
                             r"SentencePiece vocabulary.*set subword_sampling_alpha=0"):
        ss.resample_fn(DocstringReversalBytes(), str(tmp_path), sampling(0.1))
    assert issubclass(ss.SubwordSamplingError, HParamsError)  # t2t-trainer: one line
    from t2t import registry

    token = registry.problem("algorithmic_reverse_binary40_test")
    with pytest.raises(ss.SubwordSamplingError, match="'token' vocabulary"):
        ss.resample_fn(token, str(tmp_path), sampling(0.1))
    texts = sentences.docstring_sentences()[:300]
    for model_type, nbest, match in (("char", -1, "CHAR model, which has one segmentation"),
                                     ("bpe", 4, "BPE model: .* set subword_sampling_nbest=-1")):
        model = SentencePieceEncoder.train(texts, tmp_path / model_type, 100,
                                           model_type=model_type)
        with pytest.raises(ss.SubwordSamplingError, match=match):
            ss.SegmentResampler(model.model_proto, ss.SamplingSettings(0.1, nbest))
    bpe = ss.SegmentResampler(model.model_proto, ss.SamplingSettings(0.1))  # BPE-dropout
    ids = [model.encode(text) + [1] for text in texts[:50]]
    dropped = bpe(tf.ragged.constant(ids, dtype=tf.int32)).to_list()
    assert dropped != ids and [model.decode(d) for d in dropped] == [model.decode(i) for i in ids]
    for bad, match in (("subword_sampling_nbest=1", "subword_sampling_nbest=1: use -1"),
                       ("subword_sampling_alpha=-0.5", "alpha >= 0")):
        with pytest.raises(ss.SubwordSamplingError, match=match):
            ss.resample_fn(problem, data_dir, create_hparams("transformer_test", bad + (
                ",subword_sampling_alpha=0.1" if "nbest" in bad else "")))


def test_training_with_sampling_learns_and_decoding_does_not_sample(data, tmp_path):
    problem, data_dir = data
    hparams = sampling(0.2, nbest=4, extra="batch_size=512,learning_rate_warmup_steps=20,"
                                           "max_length=64")
    trainer = Trainer(problem, "transformer", hparams, data_dir, str(tmp_path / "run"),
                      TrainerConfig(train_steps=60, save_checkpoints_steps=60, eval_steps=0,
                                    local_eval_frequency=60, log_every_steps=20,
                                    decode_summaries=0),
                      RuntimeConfig(random_seed=1, deterministic=True))
    trainer.train()
    losses = [loss for _, loss in trainer.loss_history]
    assert len(losses) == 60 and np.mean(losses[-10:]) < 0.85 * np.mean(losses[:10]), losses
    decoder = Decoder(problem, trainer.model, data_dir)
    encoder = problem.feature_encoders(data_dir)["inputs"]
    for inputs, _ in stored(problem, data_dir, problem_lib.EVAL)[:20]:
        text = encoder.decode(list(inputs[:-1]))
        for _ in range(2):
            assert decoder.encode_text(text).tolist() == list(inputs)


def test_a_sampled_run_that_splits_a_user_defined_symbol_keeps_the_stored_ids(data):
    # SentencePiece's sampler splits "<sep>" into "<" "sep" ">" now and then (~1 in 5000
    # sentences at alpha 0.2): "<" and ">" are unknown to the vocabulary, and the symbol
    # must stay one id. A sampler that always splits it shows the stored run is kept.
    problem, data_dir = data
    encoder = problem.feature_encoders(data_dir)["targets"]

    class SplittingResampler(ss.SegmentResampler):
        def _tokenize(self, texts, seed):
            split = [2, *encoder.encode("sep"), 2]  # <UNK> s e p <UNK>
            return tf.ragged.constant(
                [[t for i in row for t in (split if i == 3 else [i])]
                 for row in super()._tokenize(texts, seed).to_list()], dtype=tf.int32)

    resampler = SplittingResampler(encoder.model_proto, ss.SamplingSettings(0.0))
    rows = [list(t) for _, t in stored(problem, data_dir)[:20]]
    rows.append(encoder.encode("raise an exception") + [1])  # no symbol: the best ids
    out = resampler(tf.ragged.constant(rows, dtype=tf.int32)).to_list()
    assert out == rows
    assert all(row.count(3) == 1 for row in out[:-1])
