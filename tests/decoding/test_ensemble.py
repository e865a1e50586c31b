"""t2t.decoding.ensemble: checkpoints (of one run, or of runs with other sizes) decoding
as one model, in greedy decoding, beam search and sampling, in t2t-decoder and in an
exported SavedModel; members of another problem or vocabulary refused."""

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.config import RuntimeConfig, TrainerConfig
from t2t.data import problem as problem_lib
from t2t.data.bases import text_problems
from t2t.decoding import beam_search, ensemble, infer
from t2t.decoding import decoder as decoder_lib
from t2t.features import ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.models import t2t_model
from tests.helpers.binaries import run_binary
from tests.helpers.model_checks import push_down_pad_and_eos

PROBLEM = "algorithmic_reverse_binary40_test"
CHARS_PROBLEM = "ensemble_chars_test"
# Run B differs from run A in its sizes (a member's hparams are its own run's).
HPARAMS_A = "batch_size=256,learning_rate_constant=0.2,learning_rate_warmup_steps=1"
HPARAMS_B = "batch_size=256,hidden_size=24,filter_size=12,num_heads=3"
INPUTS = tf.constant([[3, 2, 3, 3, 2, 2, 3, 1], [2, 3, 1, 0, 0, 0, 0, 0]])  # "1 0 1 1 0 0 1", "0 1"
LENGTH = 10


@registry.register_problem(CHARS_PROBLEM)
class EnsembleChars(text_problems.Text2TextProblem):
    """A character-vocabulary problem: its vocabulary is built from the data, so two
    data folders generated from other texts have other vocabularies."""

    vocab_type = text_problems.VOCAB_CHARACTER
    splits = (problem_lib.SplitSpec("train", 1), problem_lib.SplitSpec("dev", 1))
    texts = ("abc", "cab", "bca")

    def generate_samples(self, data_dir, tmp_dir, split, *, mirror=None):
        for text in self.texts:
            yield {"inputs": text, "targets": text[::-1]}


def _late_eos(model):
    """Pushes the logits of PAD and EOS down (through the final norm's bias and the
    shared embedding), as tests/serving/test_export.py does: an untrained model whose
    decodes are real tokens, not an immediate EOS."""
    push_down_pad_and_eos(model, eos_logit=-3.0)


def _run(problem_name, data_dir, output_dir, hparams, steps, seed, late_eos=False):
    """A training run as t2t-trainer leaves it: `steps` real steps, a checkpoint every 2
    (none: the untrained model's checkpoint at step 0, `late_eos` if asked)."""
    from t2t.trainer.trainer import Trainer

    trainer = Trainer(registry.problem(problem_name), "transformer",
                      create_hparams("transformer_test", hparams), data_dir, output_dir,
                      TrainerConfig(train_steps=steps, save_checkpoints_steps=2, eval_steps=1,
                                    local_eval_frequency=1000, log_every_steps=1000,
                                    decode_summaries=0),
                      RuntimeConfig(random_seed=seed),
                      run_info={"hparams_set": "transformer_test", "hparams": hparams})
    if steps:
        trainer.train()
    else:
        if late_eos:
            _late_eos(trainer.model)
        trainer.save()
    return output_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run A (4 steps, checkpoints at 2 and 4) and run B (other sizes, untrained, EOS
    late) of PROBLEM; two runs of CHARS_PROBLEM whose data have other character vocabularies."""
    root = tmp_path_factory.mktemp("ensemble")
    data_dir = str(root / "data")
    registry.problem(PROBLEM).generate_data(data_dir, data_dir + "/tmp", progress=False)
    found = {"data_dir": data_dir,
             "a": _run(PROBLEM, data_dir, str(root / "run_a"), HPARAMS_A, 4, seed=1),
             "b": _run(PROBLEM, data_dir, str(root / "run_b"), HPARAMS_B, 0, seed=2,
                       late_eos=True)}
    for key, texts in (("chars_1", ("abc", "cab")), ("chars_2", ("xyz", "zyx"))):
        chars_data = str(root / f"data_{key}")
        problem = registry.problem(CHARS_PROBLEM)
        problem.texts = texts
        problem.generate_data(chars_data, chars_data + "/tmp", progress=False)
        found[key] = _run(CHARS_PROBLEM, chars_data, str(root / key), "batch_size=64", 0, seed=3)
        found[f"data_{key}"] = chars_data
    return found


@pytest.fixture(scope="module")
def members(runs):
    """The models of run A's two checkpoints and of run B, loaded."""
    problem = registry.problem(PROBLEM)
    hparams = {"a": create_hparams("transformer_test", HPARAMS_A),
               "b": create_hparams("transformer_test", HPARAMS_B)}
    return {name: decoder_lib.load_model(problem, "transformer", hparams[name[0]],
                                         runs["data_dir"], os.path.join(runs[name[0]], ckpt))
            for name, ckpt in (("a2", "ckpt-2"), ("a4", "ckpt-4"), ("b0", "ckpt-0"))}


# ------------------------------------------------------------------ combining
def test_combine_log_probs_linear_and_log_linear():
    first, second = tf.constant([[2.0, 0.0, -1.0]]), tf.constant([[0.0, 3.0, 0.5]])
    p1, p2 = tf.nn.softmax(first).numpy(), tf.nn.softmax(second).numpy()
    np.testing.assert_allclose(ensemble.combine_log_probs([first, second], "linear"),
                               np.log((p1 + p2) / 2), atol=1e-6)
    np.testing.assert_allclose(ensemble.combine_log_probs([first, second], "log_linear"),
                               (np.log(p1) + np.log(p2)) / 2, atol=1e-6)
    with pytest.raises(ensemble.EnsembleError, match="combine='mean': use one of linear, log_linear"):
        ensemble.combine_log_probs([first], "mean")


def test_split_members_keeps_urls_whole():
    assert ensemble.split_members("a/ckpt-2:b") == ["a/ckpt-2", "b"]
    assert ensemble.split_members("gs://x/r1:gs://x/r2/ckpt-5") == ["gs://x/r1", "gs://x/r2/ckpt-5"]
    assert ensemble.split_members("run") == ["run"]
    with pytest.raises(ensemble.EnsembleError, match="names an empty member"):
        ensemble.split_members("a::b")


# -------------------------------------------------------------- one member
@pytest.mark.parametrize("settings", [{}, {"beam_size": 3, "top_beams": 3, "alpha": 2.0},
                                      {"temperature": 1.0, "seed": 5}])
def test_an_ensemble_of_one_decodes_as_its_model(members, settings):
    model = members["a4"]
    want = infer.infer(model, {"inputs": INPUTS}, LENGTH, **settings)
    got = infer.infer(ensemble.EnsembleModel([model]), {"inputs": INPUTS}, LENGTH, **settings)
    np.testing.assert_array_equal(got["outputs"], want["outputs"])
    np.testing.assert_allclose(got["scores"], want["scores"], atol=1e-5)


# ----------------------------------------------------------- the steps
@pytest.mark.parametrize("combine", ["linear", "log_linear"])
def test_each_step_combines_the_members_log_probabilities(members, combine):
    models = [members["a2"], members["a4"], members["b0"]]
    ens = ensemble.EnsembleModel(models, combine)
    state = ens.decode_init_cached({"inputs": INPUTS}, LENGTH)
    own = [m.decode_init_cached({"inputs": INPUTS}, LENGTH) for m in models]
    previous = tf.zeros([2], tf.int32)
    for index in range(4):
        logits, state = ens.decode_step_cached(previous, tf.constant(index), state)
        log_probs = []
        for i, model in enumerate(models):
            member_logits, own[i] = model.decode_step_cached(previous, tf.constant(index), own[i])
            log_probs.append(tf.nn.log_softmax(member_logits).numpy())
        # The members disagree (else any average would pass).
        assert np.abs(log_probs[0] - log_probs[1]).max() > 1e-3
        assert np.abs(log_probs[0] - log_probs[2]).max() > 1e-2
        want = (np.mean(log_probs, axis=0) if combine == "log_linear"
                else np.log(np.mean(np.exp(log_probs), axis=0)))
        np.testing.assert_allclose(logits.numpy(), want, atol=1e-5)
        previous = tf.constant([2 + index % 2, 3])


def test_cached_steps_equal_the_uncached_recompute(members):
    ens = ensemble.EnsembleModel([members["a2"], members["b0"]])
    cached = ens.decode_init_cached({"inputs": INPUTS}, LENGTH)
    uncached = ens.decode_init({"inputs": INPUTS}, LENGTH)
    assert beam_search.SLOTS in cached and beam_search.SLOTS not in uncached
    previous = tf.zeros([2], tf.int32)
    for index, next_ids in enumerate([[3, 2], [2, 2], [3, 3], [2, 1], [1, 0]]):
        fast, cached = ens.decode_step_cached(previous, tf.constant(index), cached)
        slow, uncached = ens.decode_step(previous, tf.constant(index), uncached)
        np.testing.assert_allclose(fast.numpy(), slow.numpy(), atol=1e-4)
        previous = tf.constant(next_ids)


class _WithoutCache:
    """A member that only re-runs its prefix (as models without a cached decoder do)."""

    has_decode_cache = False

    def __init__(self, model):
        self.problem_hparams, self.hparams = model.problem_hparams, model.hparams
        self.variables = model.variables
        self.decode_init, self.decode_step = model.decode_init, model.decode_step


def test_members_with_and_without_a_cache_mix(members):
    """One member cached (its caches under the ensemble's SLOTS), one re-running its
    prefix (its state reordered by beam search): as the ensemble of cached members."""
    mixed = ensemble.EnsembleModel([_WithoutCache(members["a2"]), members["b0"]])
    cached = ensemble.EnsembleModel([members["a2"], members["b0"]])
    assert mixed.has_decode_cache
    state = mixed.decode_init_cached({"inputs": INPUTS}, LENGTH)
    assert list(state[beam_search.SLOTS]) == ["member_1"]
    assert "targets" in state[ensemble.MEMBERS][0]  # the prefix buffer
    settings = {"beam_size": 3, "top_beams": 3, "alpha": 2.0}
    want = infer.infer(cached, {"inputs": INPUTS}, LENGTH, **settings)
    got = infer.infer(mixed, {"inputs": INPUTS}, LENGTH, **settings)
    np.testing.assert_array_equal(got["outputs"], want["outputs"])
    np.testing.assert_allclose(got["scores"], want["scores"], atol=1e-4)


def test_members_must_share_the_targets(members):
    other = create_hparams("transformer_test")
    php = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 4, "targets": 6})
    stranger = t2t_model.create_model("transformer", other, problem_lib.PREDICT, php)
    with pytest.raises(ensemble.EnsembleError, match=r"Ensemble members A \(symbol targets, "
                       r"vocabulary 4\) and B \(symbol, 6\) do not share the targets"):
        ensemble.EnsembleModel([members["a2"], stranger], names=["A", "B"])
    with pytest.raises(ensemble.EnsembleError, match="needs at least one member"):
        ensemble.EnsembleModel([])


@pytest.mark.parametrize("settings", [{}, {"beam_size": 3, "top_beams": 3, "alpha": 2.0},
                                      {"temperature": 1.0, "seed": 7, "num_samples": 2}])
def test_decodes_are_scored_by_the_combined_distribution(members, settings):
    """Greedy, beam and sampled outputs each scored by the ensemble's teacher-forced
    log-probabilities (beam scores: divided by the length penalty): beam search kept
    every member's cache in its hypotheses' order."""
    ens = ensemble.EnsembleModel([members["a2"], members["b0"]])
    result = infer.infer(ens, {"inputs": INPUTS}, LENGTH, **settings)
    outputs = result["outputs"].numpy().reshape(-1, LENGTH)
    scores = result["scores"].numpy().reshape(-1)
    copies = outputs.shape[0] // 2
    inputs = np.repeat(INPUTS.numpy(), copies, axis=0)
    log_probs, _ = ens({"inputs": tf.constant(inputs), "targets": tf.constant(outputs)})
    # Normalized as the decoders do (log_linear's mean log-probabilities are not).
    log_probs = tf.nn.log_softmax(tf.reshape(log_probs, [outputs.shape[0], LENGTH, -1])).numpy()
    alpha = settings.get("alpha", 0.0) if settings.get("beam_size", 1) > 1 else 0.0
    for row, ids in enumerate(outputs):
        if scores[row] <= beam_search.NEG_INF / 2:
            continue  # a beam slot no finished hypothesis filled
        length = int(np.argmax(ids == 1)) + 1 if (ids == 1).any() else LENGTH
        total = sum(log_probs[row, t, ids[t]] for t in range(length))
        penalty = ((5.0 + length) / 6.0) ** alpha
        np.testing.assert_allclose(scores[row], total / penalty, atol=1e-4, err_msg=str(ids))
    assert (outputs[:, 0] > 1).any()  # real tokens, not an immediate EOS everywhere


# ------------------------------------------------------------------ loading
def test_load_ensemble_from_prefixes_and_run_folders(runs, caplog):
    problem = registry.problem(PROBLEM)
    members = [os.path.join(runs["a"], "ckpt-2"), runs["a"], runs["b"]]
    ens = ensemble.load_ensemble(problem, members, runs["data_dir"], combine="log_linear")
    assert len(ens) == 3 and ens.combine == "log_linear"
    assert ens.names == [os.path.join(runs["a"], "ckpt-2"), os.path.join(runs["a"], "ckpt-4"),
                         os.path.join(runs["b"], "ckpt-0")]
    assert [m.hparams.hidden_size for m in ens.members] == [16, 16, 24]  # each run's own
    assert ens.checkpoint_path == ":".join(ens.names)
    assert ensemble.last_checkpoints(runs["a"], 2) == ens.names[:2]
    with caplog.at_level(logging.WARNING):
        assert ensemble.last_checkpoints(runs["a"], 5) == ens.names[:2]
    assert "keeps 2 checkpoint(s), fewer than the 5 asked for" in caplog.text
    with pytest.raises(decoder_lib.DecodeError, match="no checkpoint in"):
        ensemble.load_ensemble(problem, [runs["a"], runs["a"] + "/ckpt-9"], runs["data_dir"])


def test_members_of_another_problem_or_vocabulary_are_refused(runs):
    with pytest.raises(ensemble.EnsembleError) as error:
        ensemble.load_ensemble(registry.problem(PROBLEM), [runs["a"], runs["chars_1"]],
                               runs["data_dir"])
    assert (f"Ensemble members {runs['a']} (problem '{PROBLEM}') and {runs['chars_1']} "
            f"(problem '{CHARS_PROBLEM}') were trained on different problems") in str(error.value)
    chars = registry.problem(CHARS_PROBLEM)
    with pytest.raises(ensemble.EnsembleError) as error:
        ensemble.load_ensemble(chars, [runs["chars_1"], runs["chars_2"]], runs["data_chars_1"])
    assert (f"Ensemble members {runs['chars_1']} and {runs['chars_2']} were trained with "
            f"different target vocabularies") in str(error.value)
    with pytest.raises(ensemble.EnsembleError, match="differs from the one in"):
        ensemble.load_ensemble(chars, [runs["chars_2"]], runs["data_chars_1"])


# ----------------------------------------------------------------- binaries
def test_t2t_decoder_decodes_a_file_with_an_ensemble(runs, members, tmp_path):
    """--checkpoint_path=A:B (runs of other sizes; greedy, log_linear: run B's
    improbable EOS never wins, whatever run A says) decodes a file as the library's
    ensemble does; --ensemble_last=2 scores a file with run A's last two checkpoints."""
    source = tmp_path / "source.txt"
    source.write_text("1 0 1 1 0 0 1\n0 1\n1 1 0\n")
    settings = "beam_size=1,extra_length=3,write_beam_scores=True,batch_size=2"
    out = tmp_path / "pair.decodes"
    result = run_binary("t2t-decoder", f"--output_dir={runs['a']}",
                        f"--checkpoint_path={runs['a']}/ckpt-2:{runs['b']}",
                        "--ensemble_combine=log_linear", f"--decode_from_file={source}",
                        f"--decode_to_file={out}", f"--decode_hparams={settings}")
    assert result.code == 0, result.err
    problem = registry.problem(PROBLEM)
    pair = ensemble.EnsembleModel([members["a2"], members["b0"]], "log_linear")
    decoder = decoder_lib.Decoder(problem, pair, runs["data_dir"],
                                  decoder_lib.DecodeHParams.parse(settings))
    want = [decoder_lib.format_result(r, decoder.decode_hparams)
            for r in decoder.decode_texts(source.read_text().splitlines())]
    assert out.read_text().splitlines() == want
    assert all(line.split("\t")[0].strip() for line in want), want  # real tokens

    pairs = tmp_path / "pairs.txt"
    pairs.write_text("1 0 1\t1 0 1\n0 1 1\t1 1 0\n")
    result = run_binary("t2t-decoder", f"--output_dir={runs['a']}", "--ensemble_last=2",
                        f"--score_file={pairs}")
    assert result.code == 0, result.err
    last_two = ensemble.EnsembleModel([members["a2"], members["a4"]])  # log_linear
    want = []
    for source_ids, target_ids in (([3, 2, 3, 1], [3, 2, 3, 1]), ([2, 3, 3, 1], [3, 3, 2, 1])):
        log_probs, _ = last_two({"inputs": tf.constant([source_ids]),
                                 "targets": tf.constant([target_ids])})
        log_probs = tf.nn.log_softmax(tf.reshape(log_probs, [4, -1])).numpy()  # as scored
        want.append(sum(log_probs[t, target_ids[t]] for t in range(4)))
    got = [float(line) for line in (tmp_path / "pairs.txt.scores").read_text().splitlines()]
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_t2t_decoder_refuses_bad_ensembles_in_one_line(runs, tmp_path):
    source = tmp_path / "source.txt"
    source.write_text("abc\n")
    cases = [
        ([f"--output_dir={runs['chars_1']}", f"--checkpoint_path={runs['chars_1']}:{runs['chars_2']}"],
         f"error: Ensemble members {runs['chars_1']} and {runs['chars_2']} were trained with "
         f"different target vocabularies"),
        ([f"--output_dir={runs['a']}", f"--checkpoint_path={runs['a']}:{runs['b']}",
          "--ensemble_last=2"], "--ensemble_last=N takes a run's last N checkpoints: give one."),
        ([f"--output_dir={runs['a']}", "--ensemble_combine=log_linear"],
         "--ensemble_combine combines an ensemble's members"),
        ([f"--output_dir={runs['a']}", "--ensemble_last=-1"], "--ensemble_last=-1: give N >= 1"),
        ([f"--output_dir={runs['a']}", f"--checkpoint_path={runs['a']}:{tmp_path}"],
         f"error: no checkpoint in {tmp_path}"),
    ]
    for flags, message in cases:
        result = run_binary("t2t-decoder", *flags, f"--decode_from_file={source}",
                            f"--decode_to_file={tmp_path / 'out.txt'}")
        assert result.code == 1, (flags, result.err)
        assert message in result.err and not result.traceback, (flags, result.err)
        assert len([line for line in result.err.splitlines() if line.startswith("error:")]) == 1
    assert not (tmp_path / "out.txt").exists()
    refused = run_binary("t2t-exporter", f"--output_dir={runs['a']}", "--ensemble_last=2",
                         "--format=keras", f"--export_dir={tmp_path / 'keras'}")
    assert refused.code == 1 and not refused.traceback
    assert "error: --format=keras exports one model; an ensemble" in refused.err
    assert not (tmp_path / "keras").exists()


def _saved_model_cli_run(version_dir, lines, outdir):
    command = [os.path.join(os.path.dirname(sys.executable), "saved_model_cli"), "run",
               "--dir", version_dir, "--tag_set", "serve", "--signature_def", "serving_default",
               "--input_exprs", f"inputs={json.dumps(lines)}", "--outdir", str(outdir)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    return {name: np.load(outdir / f"{name}.npy", allow_pickle=True)
            for name in ("outputs", "scores")}


# slow (~30 CPU-s): an export (a traced ensemble beam search), a saved_model_cli process
# and the in-process Decoder's trace. The flags' wiring to it is checked above.
@pytest.mark.slow
def test_exported_ensemble_decodes_as_the_ensemble_in_a_fresh_process(runs, members, tmp_path):
    settings = "beam_size=1,extra_length=3"  # greedy, log_linear: real tokens (see above)
    result = run_binary("t2t-exporter", f"--output_dir={runs['a']}",
                        f"--checkpoint_path={runs['a']}/ckpt-2:{runs['b']}",
                        f"--export_dir={tmp_path / 'export'}", f"--decode_hparams={settings}",
                        "--ensemble_combine=log_linear", "--skip_parity_check")
    assert result.code == 0, result.err
    (version,) = os.listdir(tmp_path / "export")
    version_dir = str(tmp_path / "export" / version)
    with open(os.path.join(version_dir, "assets.extra", "t2t_export.json")) as f:
        info = json.load(f)
    assert info["ensemble"]["combine"] == "log_linear"
    assert [m["checkpoint"] for m in info["ensemble"]["members"]] == [
        f"{runs['a']}/ckpt-2", f"{runs['b']}/ckpt-0"]
    assert info["checkpoint"] == f"{runs['a']}/ckpt-2:{runs['b']}/ckpt-0"
    with open(os.path.join(version_dir, "assets.extra", "hparams.json")) as f:
        assert [h["hidden_size"] for h in json.load(f)] == [16, 24]
    lines = ["1 0 1 1 0 0 1", "0 1", "1 x 1"]
    got = _saved_model_cli_run(version_dir, lines, tmp_path)  # a process without t2t
    ens = ensemble.EnsembleModel([members["a2"], members["b0"]], "log_linear")
    want = decoder_lib.Decoder(registry.problem(PROBLEM), ens, runs["data_dir"],
                               decoder_lib.DecodeHParams.parse(settings)).decode_texts(lines)
    assert [b.decode() for b in got["outputs"]] == [r.text for r in want]
    assert all(r.text for r in want[:2]), want  # real tokens ("1 x 1" is an empty input)
    np.testing.assert_allclose(got["scores"], [r.score for r in want], atol=1e-4)
