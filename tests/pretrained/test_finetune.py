"""Fine-tuning an imported model (issue 52, point 3): a tiny MarianMTModel saved by
transformers, imported, then fine-tuned by t2t-trainer on a --t2t_usr_dir problem whose
class sets `use_vocab_from = RUN` (its data encoded with the imported vocabulary, no
flag given): the problem reuses the imported vocabulary, the trainer starts from the
imported weights, and a few hundred steps improve the dev loss (eval_results.jsonl).
The binaries' mains run in the test process (tests/helpers/binaries.py)."""

import json
import os

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from t2t import registry  # noqa: E402
from t2t.data.encoders.pretrained_vocab import load_pretrained_encoders  # noqa: E402
from t2t.pretrained import import_run  # noqa: E402
from tests.helpers.binaries import run_binary  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
PROBLEM = "pretrained_finetune_test_pairs"
STEPS = 200  # most of the time goes to tracing the steps' shapes, not to steps
# English -> German messages of the catalogs the fixture's tokenizer was trained on;
# every 10th is dev. `use_vocab_from` is the imported run (filled in by the fixture).
USR_MODULE = '''
from t2t import registry
from t2t.data.bases import text_core as text_problems
from tests.helpers import hf_fixtures


@registry.register_problem("{problem}")
class PretrainedFinetuneTestPairs(text_problems.Text2TextProblem):
    use_vocab_from = {run!r}
    dataset_splits = [{{"split": "train", "shards": 1}}, {{"split": "dev", "shards": 1}}]

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        for i, (english, german) in enumerate(hf_fixtures.gettext_pairs("de", limit=1000)):
            if (i % 10 == 0) == (dataset_split == "dev"):
                yield {{"inputs": english, "targets": german}}
'''


@pytest.fixture(scope="module")
def fine_tuned(hf_checkpoint, tmp_path_factory):
    """The imported run, its data (t2t-datagen, no --use_vocab_from flag), the dev loss of
    the imported weights (--schedule=evaluate) and a fine-tuning of STEPS steps."""
    root = tmp_path_factory.mktemp("finetune")
    run, data, usr = str(root / "run"), str(root / "data"), root / "usr"
    import_run.import_checkpoint(hf_checkpoint("marian_swish"), run)
    usr.mkdir()
    (usr / "__init__.py").write_text(USR_MODULE.format(problem=PROBLEM, run=run))
    common = [f"--t2t_usr_dir={usr}", f"--problem={PROBLEM}", f"--data_dir={data}"]
    datagen = run_binary("t2t-datagen", *common, f"--tmp_dir={root / 'tmp'}")
    assert datagen.code == 0, datagen.err[-3000:]
    trainer = [*common, f"--output_dir={run}", "--eval_steps=0", "--eval_decode_examples=0"]
    before = run_binary("t2t-trainer", "--schedule=evaluate", *trainer)
    assert before.code == 0, before.err[-3000:]
    train = run_binary("t2t-trainer", *trainer, f"--train_steps={STEPS}",
                       f"--local_eval_frequency={STEPS}",
                       "--hparams=learning_rate_constant=5e-3,batch_size=512")
    assert train.code == 0, train.err[-3000:]
    with open(os.path.join(run, "eval_results.jsonl"), encoding="utf-8") as f:
        evaluations = [json.loads(line) for line in f]
    return {"run": run, "data": data, "before": before, "train": train,
            "evaluations": evaluations}


def test_a_usr_dir_problem_with_use_vocab_from_encodes_with_the_imported_vocabulary(
        fine_tuned):
    run, data = fine_tuned["run"], fine_tuned["data"]
    assert os.path.isfile(os.path.join(data, f"vocab.{PROBLEM}.pretrained.json"))
    imported = load_pretrained_encoders(run)
    problem = registry.problem(PROBLEM)
    encoders = problem.feature_encoders(data)
    text = "Datei nicht gefunden"
    for feature in ("inputs", "targets"):
        assert encoders[feature].vocab_size == imported[feature].vocab_size
        assert encoders[feature].encode(text) == imported[feature].encode(text), feature
    with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
        assert json.load(f)["problem_hparams"]["vocab_size"] == {
            "inputs": imported["inputs"].vocab_size, "targets": imported["targets"].vocab_size}


def test_the_trainer_starts_from_the_imported_weights(fine_tuned):
    for result in (fine_tuned["before"], fine_tuned["train"]):
        assert "Fine-tuning the MarianMTModel imported from " in result.out + result.err
    steps = [e["step"] for e in fine_tuned["evaluations"]]
    assert steps == [0, STEPS]  # the evaluation of the imported weights, then the last step
    assert os.path.exists(os.path.join(fine_tuned["run"], f"ckpt-{STEPS}.index"))


def test_a_few_hundred_steps_improve_the_dev_loss(fine_tuned):
    before, after = fine_tuned["evaluations"][0], fine_tuned["evaluations"][-1]
    print(f"dev loss {before['loss']:.4f} -> {after['loss']:.4f}, accuracy "
          f"{before['accuracy']:.4f} -> {after['accuracy']:.4f}")
    assert after["loss"] < before["loss"] - 0.5
    assert after["accuracy"] > before["accuracy"]
