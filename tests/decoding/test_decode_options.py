"""Tensor2Tensor's decode hparams on a real transformer checkpoint (trained briefly):
partial_targets, force_decode_length, num_decodes, delimiter, shards/shard_id, and the
model hparams' sampling_method / sampling_temp / sampling_keep_top_k.

What is checked holds for any weights: a forced prefix is what the model's own
teacher-forced argmax continues, lengths are exact, passes are the samples num_samples
draws, parts concatenate to the whole."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.decoding import decoder as decoder_lib
from t2t.decoding import infer
from t2t.decoding.decoder import DecodeHParams, Decoder
from t2t.features import EOS_ID
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints, t2t_model
from tests.helpers.model_checks import losses_on_a_fixed_batch

PROBLEM = "algorithmic_reverse_binary40_test"
LINES = ["1 0 1", "0", "1 1 0 0 1 0", "0 1", "1 1 1"]
TOKEN = {"0": 2, "1": 3}  # the problem's ids of its two symbols (EOS is 1)


def _reverse_batch(count: int, seed: int) -> dict[str, tf.Tensor]:
    """`count` random bit strings (ids 2, 3) and their reversals, + EOS, 0-padded."""
    rng = np.random.default_rng(seed)
    inputs, targets = np.zeros([2, count, 10], np.int32)
    for row in range(count):
        bits = rng.integers(2, 4, rng.integers(1, 9))
        inputs[row, : len(bits) + 1] = [*bits, EOS_ID]
        targets[row, : len(bits) + 1] = [*bits[::-1], EOS_ID]
    return {"inputs": tf.constant(inputs), "targets": tf.constant(targets)}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(data_dir, run) of transformer_test trained 60 Adam steps on a fixed batch of
    PROBLEM's task: it writes bits and EOS (an untrained one also writes padding)."""
    root = tmp_path_factory.mktemp("decode_options")
    data_dir = str(root / "data")
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    keras.utils.set_random_seed(5)
    model = t2t_model.create_model("transformer", create_hparams("transformer_test"),
                                   problem_lib.TRAIN, problem.hparams(data_dir))
    losses = losses_on_a_fixed_batch(model, _reverse_batch(32, seed=0), steps=60)
    assert losses[-1] < 0.7 * losses[0]
    path = str(root / "run")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)),
                               path, 1).save(1)
    return data_dir, path


_MODELS: dict = {}


def _decoder(run, settings: str, hparams: str = "") -> Decoder:
    """A Decoder of the checkpoint (one loaded model per hparams string)."""
    data_dir, path = run
    problem = registry.problem(PROBLEM)
    if (path, hparams) not in _MODELS:
        _MODELS[(path, hparams)] = decoder_lib.load_model(
            problem, "transformer", create_hparams("transformer_test", hparams), data_dir, path)
    return Decoder(problem, _MODELS[(path, hparams)], data_dir, DecodeHParams.parse(settings))


def _ids(text: str) -> list[int]:
    return [TOKEN[w] for w in text.split()]


# ------------------------------------------------------------- partial_targets
def test_partial_targets_continue_the_prefix_as_the_model_would(run):
    lines = ["1 0 1\t0 1", "0 0\t1 1 1", "1 1 0\t", "0 1 1 0"]  # no tab: no prefix
    decoder = _decoder(run, "beam_size=1,batch_size=1,extra_length=3,partial_targets=true,"
                            "return_prompt=true")
    for line, result in zip(lines, decoder.decode_texts(lines), strict=True):
        source, _, prefix = line.partition("\t")
        inputs = tf.constant([[*_ids(source), EOS_ID]])
        out = infer.infer(decoder.model, {"inputs": inputs, "prompt": tf.constant([_ids(prefix)])},
                          len(_ids(source)) + 1 + 3)  # the decoder's length for a lone line
        continuation = out["outputs"].numpy()[0].tolist()
        if EOS_ID in continuation:
            continuation = continuation[: continuation.index(EOS_ID) + 1]
        # Written: the prefix, then what follows it (return_prompt; else only the latter).
        assert result.text == decoder.target_text(np.asarray(_ids(prefix) + continuation))
        assert result.text.startswith(prefix)
        # Teacher-forced on prefix + continuation, the model's argmax after the prefix is
        # the continuation, up to its EOS.
        target = tf.constant([_ids(prefix) + continuation])
        logits, _ = decoder.model({"inputs": inputs, "targets": target}, training=False)
        assert np.argmax(logits.numpy()[0], -1)[len(_ids(prefix)):].tolist() == continuation
    plain = _decoder(run, "beam_size=1,extra_length=3,partial_targets=true")
    assert plain.decode_texts(["0 0\t1 1 1"])[0].text == \
        decoder.decode_texts(["0 0\t1 1 1"])[0].text.removeprefix("1 1 1").strip()


def test_partial_targets_with_beams_and_samples(run):
    beams = _decoder(run, "beam_size=3,return_beams=true,extra_length=3,partial_targets=true,"
                          "return_prompt=true").decode_texts(["1 0 1\t1 1 0"])[0]
    assert len(beams.beams) == 3 and all(t.startswith("1 1 0") for t, _ in beams.beams)
    scores = [s for _, s in beams.beams]
    assert scores == sorted(scores, reverse=True)
    settings = "temperature=1.0,num_samples=3,seed=2,extra_length=3,partial_targets=true"
    samples = _decoder(run, settings + ",return_prompt=true").decode_texts(["0 1\t0"])[0]
    assert all(t.startswith("0") and set(t.split()) <= {"0", "1"} for t, _ in samples.beams)
    again = _decoder(run, settings + ",return_prompt=true").decode_texts(["0 1\t0"])[0]
    assert again.beams == samples.beams  # seeded: repeats
    with pytest.raises(decoder_lib.DecodeError, match="the dev set has none"):
        _decoder(run, "partial_targets=true").decode_dev_set(1)


# --------------------------------------------------------- force_decode_length
def test_force_decode_length_gives_each_output_exactly_its_length(run):
    fixed = _decoder(run, "beam_size=1,batch_size=2,force_decode_length=true,max_new_tokens=7")
    assert [len(r.text.split()) for r in fixed.decode_texts(LINES)] == [7] * len(LINES)
    # Without max_new_tokens: each row its own input length (+ EOS) + extra_length,
    # whatever the other rows of its batch. (Beams and prompts: tests/decoding/test_infer.)
    per_row = _decoder(run, "beam_size=1,batch_size=5,force_decode_length=true,extra_length=2")
    lengths = [len(r.text.split()) for r in per_row.decode_texts(LINES)]
    assert lengths == [len(line.split()) + 3 for line in LINES]


# ----------------------------------------------------------------- num_decodes
def test_num_decodes_passes_draw_the_samples_num_samples_would(run, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES[:3]) + "\n")
    passes = _decoder(run, "temperature=1.0,seed=4,num_decodes=3,batch_size=2")
    assert passes.decode_file(str(source), str(tmp_path / "out.txt")) == 9
    written = (tmp_path / "out.txt").read_text().splitlines()
    samples = _decoder(run, "temperature=1.0,seed=4,num_samples=3").decode_texts(LINES[:3])
    # Pass k of line i is sample k of line i: a seeded run differs pass to pass, repeats.
    assert written == [samples[i].beams[k][0] for k in range(3) for i in range(3)]
    assert written[:3] != written[3:6] or written[3:6] != written[6:]
    triples = _decoder(run, "beam_size=1,num_decodes=2,batch_size=3").decode_dev_set(1)
    assert len(triples) == 6 and triples[:3] == triples[3:]  # greedy: passes agree


# ---------------------------------------------------------- delimiter, shards
def test_delimiter_and_contiguous_shards_of_a_file(run, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text(";\n".join(LINES) + ";\n")  # a record per line, each ending in ;
    whole = _decoder(run, "beam_size=1,batch_size=3,extra_length=2,delimiter=;")
    assert whole.decode_file(str(source), str(tmp_path / "all.txt")) == len(LINES)
    expected = [r.text for r in whole.decode_texts(LINES)]
    assert (tmp_path / "all.txt").read_text().splitlines() == expected
    parts = []
    for shard in range(2):  # what t2t-decoder --decode_hparams=shards=2,shard_id=K decodes
        whole.decode_file(str(source), str(tmp_path / f"out{shard:03d}"), part=(shard, 2))
        parts += (tmp_path / f"out{shard:03d}").read_text().splitlines()
    assert parts == expected  # the shards' decodes concatenated in order: the whole
    dev = whole.decode_dev_set(2)
    sharded = _decoder(run, "beam_size=1,batch_size=3,extra_length=2,shards=2,shard_id=1")
    assert sharded.decode_dev_set(1) == dev[1::2][:3]  # examples i with i % 2 == 1


# ------------------------------------------------ the model hparams' sampling
def test_model_sampling_hparams_are_the_defaults_and_decode_hparams_win(run):
    model_random = "sampling_method=random,sampling_temp=0.7"
    decoder = _decoder(run, "seed=3,batch_size=5", model_random)
    assert (decoder.settings.beam_size, decoder.settings.temperature) == (1, 0.7)
    explicit = _decoder(run, "beam_size=1,temperature=0.7,seed=3,batch_size=5")
    texts = [r.text for r in decoder.decode_texts(LINES)]
    assert texts == [r.text for r in explicit.decode_texts(LINES)]
    greedy = [r.text for r in _decoder(run, "beam_size=1,batch_size=5").decode_texts(LINES)]
    assert texts != greedy  # sampled at 0.7, not the argmax
    # An explicit temperature=0 (or beam_size > 1) wins over the model's random sampling.
    assert _decoder(run, "temperature=0,beam_size=1", model_random).settings.temperature == 0
    assert _decoder(run, "beam_size=2", model_random).settings.temperature == 0.0
    # sampling_keep_top_k=1 samples among the best token only: the greedy decode.
    top1 = _decoder(run, "seed=3,batch_size=5", model_random + ",sampling_keep_top_k=1")
    assert top1.settings.top_k == 1
    assert [r.text for r in top1.decode_texts(LINES)] == greedy
