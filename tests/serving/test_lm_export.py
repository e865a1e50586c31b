"""Exporting a language model: serving_default / generate / score / serve_tf_example,
checked against t2t's Decoder and Scorer by the parity gate (a fresh process)."""

import json
import os
import pathlib
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

from t2t import registry
from t2t.config import DecodeHParams
from t2t.data import problem as problem_lib
from t2t.decoding import decoder as decoder_lib
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints, t2t_model
from t2t.serving import export as export_lib
from t2t.serving import lm_parity, parity

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
HPARAMS = "max_length=64"


def _real_text_corpus(folder: pathlib.Path) -> None:
    """Paragraphs of this project's README (real English) as a few text files."""
    paragraphs = [p.strip() for p in README.read_text(encoding="utf-8").split("\n\n")
                  if len(p.strip()) > 200 and not p.lstrip().startswith(("|", "```", "#"))]
    folder.mkdir(parents=True)
    for i in range(12):
        (folder / f"doc{i:02d}.txt").write_text("\n".join(paragraphs[i::12][:3]), encoding="utf-8")


def _train(model, problem, data_dir, steps=60):
    dataset = problem.dataset(problem_lib.TRAIN, data_dir, deterministic=True).repeat()
    dataset = dataset.padded_batch(8).take(steps)
    optimizer = keras.optimizers.Adam(3e-3)

    @tf.function(reduce_retracing=True)
    def step(targets):
        with tf.GradientTape() as tape:
            _, losses = model({"targets": tf.cast(targets, tf.int32)}, training=True)
            numerator, denominator = losses["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    for batch in dataset:
        loss = step(batch["targets"])
    return float(loss)


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm_export")
    _real_text_corpus(root / "texts")
    data_dir = str(root / "data")
    problem = registry.problem("languagemodel_text_files")
    problem.generate_data(data_dir, str(root / "texts"), progress=False)
    keras.utils.set_random_seed(2)
    hparams = create_hparams("transformer_test", HPARAMS)
    model = t2t_model.create_model("transformer", hparams, problem_lib.TRAIN,
                                   problem.hparams(data_dir))
    model.build_weights()
    _train(model, problem, data_dir)
    run = str(root / "run")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)),
                               run, 2).save(60)
    loaded = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    return problem, loaded, hparams, data_dir, run


GREEDY = "beam_size=1,max_new_tokens=12,return_prompt=true"


def _export_with_parity(lm_run, settings):
    problem, model, hparams, data_dir, run = lm_run
    return export_lib.export(problem, "transformer", hparams, data_dir, run,
                             decode_hparams=settings, model=model, parity_examples=3)


@pytest.fixture(scope="module")
def greedy_export(lm_run):
    """The greedy export (its parity gate passed), also read by the plain script below."""
    return _export_with_parity(lm_run, GREEDY)


@pytest.mark.parametrize("settings", [
    GREEDY, "temperature=0.9,top_p=0.9,num_samples=2,seed=7,max_new_tokens=10"])
def test_lm_export_passes_the_parity_gate(lm_run, greedy_export, settings):
    problem, _, _, data_dir, _ = lm_run
    path = greedy_export if settings == GREEDY else _export_with_parity(lm_run, settings)
    with open(os.path.join(path, "assets.extra", parity.EXPORT_INFO_FILE)) as f:
        info = json.load(f)
    assert set(info["signatures"]) == {"serving_default", "generate", "score", "serve_tf_example"}
    report = info["parity"]
    dev = len(lm_parity.dev_token_ids(problem, data_dir, 3))  # prompts: these + ""
    # serving_default and 2 generate calls per prompt; a score and an example per dev text
    assert dev >= 1 and not report["sampling"]
    assert report["examples"] == 3 * (dev + 1) + 2 * dev


def test_a_plain_tensorflow_script_generates_and_scores(greedy_export, tmp_path):
    path = greedy_export
    script = tmp_path / "client.py"
    script.write_text(
        "import sys, json, tensorflow as tf\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "g = m.signatures['generate'](inputs=tf.constant(['The model', '']),\n"
        "    temperature=tf.constant(0.7), top_k=tf.constant(0), top_p=tf.constant(1.0),\n"
        "    max_new_tokens=tf.constant(8), seed=tf.constant(3, tf.int64))\n"
        "g2 = m.signatures['generate'](inputs=tf.constant(['The model', '']),\n"
        "    temperature=tf.constant(0.7), top_k=tf.constant(0), top_p=tf.constant(1.0),\n"
        "    max_new_tokens=tf.constant(8), seed=tf.constant(3, tf.int64))\n"
        "s = m.signatures['score'](inputs=tf.constant(['The model is a layer.']))\n"
        "print(json.dumps({'same': bool(tf.reduce_all(g['outputs'] == g2['outputs'])),\n"
        "  'n': int(g['outputs'].shape[0]), 'lp': float(s['log_probs'][0]),\n"
        "  'tokens': int(s['tokens'][0]), 't2t': [m for m in sys.modules if m.startswith('t2t')]}))\n")
    out = subprocess.run([sys.executable, str(script), path], capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=300, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["same"] and result["n"] == 2 and result["t2t"] == []
    assert result["lp"] < 0 and result["tokens"] == len("The model is a layer.") + 1
    settings = DecodeHParams.parse("beam_size=1")
    assert settings.beam_size == 1
