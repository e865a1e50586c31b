"""The pretrained-import workflow (`python -m regression.workflows pretrained_import`):
a tiny Marian-shaped model saved by `transformers` itself, imported, fine-tuned on an
offline parallel corpus, exported and served, each step a real t2t binary.

  1. prepare: English -> Vietnamese pairs of translate_envi_gettext8k (the machine's
     gettext catalogs): OPUS-MT's tokenizer files (source.spm, target.spm, vocab.json)
     trained on the problem's train split only, a seeded MarianMTModel (TINY_MARIAN)
     saved with save_pretrained, and the test split's text;   `t2t-import` of the folder;
  2. before: t2t-decoder (beam 4) of the test sources, sacrebleu BLEU and chrF against
     the references; the dev loss by `t2t-trainer --schedule=evaluate` on the imported
     run (it reads ckpt-0 and moves nothing);
  3. `t2t-datagen --use_vocab_from=RUN`: the problem's data with the imported vocabulary;
  4. `t2t-trainer --output_dir=RUN`: fine-tunes from the imported weights (Settings.steps;
     the constant learning rate LEARNING_RATE, for a randomly initialised model);
  5. after: the same decode and evaluation;
  6. `t2t-exporter` (its parity gate must pass), `t2t-serve` on the export, the first
     Settings.served_lines test sources sent to its REST :predict, every answer compared
     with t2t-decoder's for the same sources and the export's decode settings (BEAM).

`python -m regression.pretrained_workflow prepare --model_dir=M --text_dir=T` runs step 1's
Python part alone (it needs `transformers`, `torch` and `sentencepiece`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, TextIO

from regression.tools import stream_command, tool_command
from regression.verdict import read_eval_results

GETTEXT = "translate_envi_gettext8k"
BEAM = "beam_size=4,alpha=0.6"  # the decodes' and the export's settings
LEARNING_RATE = 1e-3  # transformer_opus_mt's 1e-4 is for a trained model; this one is random
BATCH_SIZE = 2048  # tokens per batch
MODEL_NAME = "opus_tiny"  # the served model's name (/v1/models/NAME)


@dataclasses.dataclass(frozen=True)
class TinyMarian:
    """The MarianMTModel's sizes (OPUS-MT's layout at a tiny scale) and its tokenizer's."""

    d_model: int = 128
    layers: int = 2  # encoder and decoder each
    heads: int = 4
    ffn_dim: int = 256
    source_vocab_size: int = 4000
    target_vocab_size: int = 4000
    max_positions: int = 256
    seed: int = 0


TINY_MARIAN = TinyMarian()


class StepError(RuntimeError):
    """A step that is not a t2t binary (prepare, t2t-serve) failed; the message names it
    and the log."""


class Flow(Protocol):
    """What the workflow needs of regression.workflows.Workflow."""

    name: str
    settings: Any
    log: TextIO
    data_dir: str
    tmp_dir: str
    commands: list[list[str]]
    runs: dict[str, list[dict[str, float]]]

    def run(self, tool: str, *args: str) -> None: ...

    def path(self, *parts: str) -> str: ...


# ------------------------------------------------------------------ step 1 (prepare)
def gettext_pairs(split: str, tmp_dir: str) -> Iterator[tuple[str, str]]:
    """(English, Vietnamese) pairs of translate_envi_gettext8k's `split`, as the problem
    reads them."""
    from t2t import registry

    problem = registry.problem(GETTEXT)
    for sample in problem.generate_samples(None, tmp_dir, split):
        yield sample["inputs"], sample["targets"]


def write_tiny_marian(folder: str, pairs: Sequence[tuple[str, str]],
                      spec: TinyMarian = TINY_MARIAN) -> dict[str, int]:
    """A MarianMTModel folder as OPUS-MT publishes one (config.json, model.safetensors,
    source.spm, target.spm, vocab.json, tokenizer_config.json): the tokenizer trained on
    `pairs` (English, Vietnamese), random weights seeded by spec.seed. Returns its sizes."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    from tests.helpers import hf_fixtures

    hf_fixtures.write_marian_tokenizer(folder, pairs, spec.source_vocab_size,
                                       spec.target_vocab_size, "en", "vi")
    with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    torch.manual_seed(spec.seed)
    config = MarianConfig(
        vocab_size=len(vocab), d_model=spec.d_model, encoder_layers=spec.layers,
        decoder_layers=spec.layers, encoder_attention_heads=spec.heads,
        decoder_attention_heads=spec.heads, encoder_ffn_dim=spec.ffn_dim,
        decoder_ffn_dim=spec.ffn_dim, max_position_embeddings=spec.max_positions,
        pad_token_id=vocab["<pad>"], eos_token_id=vocab["</s>"],
        decoder_start_token_id=vocab["<pad>"], scale_embedding=True,
        activation_function="swish", forced_eos_token_id=None)
    model = MarianMTModel(config)
    model.save_pretrained(folder)
    return {"vocab_size": len(vocab), "train_pairs": len(pairs),
            "parameters": sum(p.numel() for p in model.parameters())}


def write_lines(path: str, lines: Sequence[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def prepare(model_dir: str, text_dir: str, tmp_dir: str, test_lines: int = 0
            ) -> dict[str, Any]:
    """Step 1's Python part: the tiny Marian folder in `model_dir` (tokenizer trained on
    the problem's train split), and text_dir/test.en, test.vi (the test split, its first
    `test_lines` pairs when > 0). Returns what it wrote (also text_dir/prepare.json)."""
    sizes = write_tiny_marian(model_dir, list(gettext_pairs("train", tmp_dir)))
    test = list(gettext_pairs("test", tmp_dir))
    test = test[:test_lines] if test_lines > 0 else test
    os.makedirs(text_dir, exist_ok=True)
    summary = {**sizes, "test_pairs": len(test), "spec": dataclasses.asdict(TINY_MARIAN),
               "source": write_lines(os.path.join(text_dir, "test.en"), [s for s, _ in test]),
               "reference": write_lines(os.path.join(text_dir, "test.vi"),
                                        [t for _, t in test])}
    with open(os.path.join(text_dir, "prepare.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    return summary


# ------------------------------------------------------------------ steps 2-6
def timed(flow: Flow, timings: dict[str, float], step: str, tool: str, *args: str) -> None:
    """flow.run(tool, *args), its wall time (s) added to timings[step]."""
    start = time.monotonic()
    try:
        flow.run(tool, *args)
    finally:
        timings[step] = timings.get(step, 0.0) + time.monotonic() - start


def run_python(flow: Flow, *args: str) -> None:
    """`python -m regression.pretrained_workflow ARGS`, logged as flow.run logs a tool
    (RuntimeError naming the command and the log when it fails)."""
    command = [sys.executable, "-m", "regression.pretrained_workflow", *args]
    flow.commands.append(command)
    status = stream_command(command, flow.log, f"[{flow.name}] ")
    if status != 0:
        raise StepError(f"exited with status {status}: {' '.join(command)} "
                           f"(log: {flow.log.name})")


def decode_scores(flow: Flow, timings: dict[str, float], step: str, run: str, source: str,
                  reference: str, target: str, decode_hparams: str) -> dict[str, float]:
    """t2t-decoder of `source` by `run` into `target`; its sacrebleu BLEU and chrF."""
    timed(flow, timings, step, "t2t-decoder", f"--output_dir={run}",
          f"--decode_hparams={decode_hparams}", f"--decode_from_file={source}",
          f"--decode_to_file={target}", f"--decode_reference={reference}")
    with open(target + ".scores.json", encoding="utf-8") as f:
        scores = json.load(f)
    return {"bleu": float(scores["bleu"]), "chrf": float(scores["chrf"])}


def latest_export(run: str) -> tuple[str, dict[str, Any]]:
    """(RUN/export/<newest version>, its assets.extra/t2t_export.json)."""
    base = os.path.join(run, "export")
    version = max((v for v in os.listdir(base) if v.isdigit()), key=int)
    with open(os.path.join(base, version, "assets.extra", "t2t_export.json"),
              encoding="utf-8") as f:
        return os.path.join(base, version), json.load(f)


def export_decode_hparams(record: dict[str, Any]) -> str:
    """The --decode_hparams that decode as the export does (its t2t_export.json)."""
    settings = record["decode_hparams"]
    return ",".join(f"{name}={settings[name]}" for name in
                    ("beam_size", "alpha", "extra_length", "max_input_length"))


SERVING_URL = re.compile(r"Serving on (http://\S+) ")


def predict(url: str, model: str, lines: Sequence[str], batch: int = 8) -> list[str]:
    """The "outputs" t2t-serve's REST :predict answers for `lines`, `batch` per request."""
    answers: list[str] = []
    for start in range(0, len(lines), batch):
        body = json.dumps({"signature_name": "serving_default",
                           "instances": list(lines[start:start + batch])}).encode()
        request = urllib.request.Request(f"{url}/v1/models/{model}:predict", data=body)
        with urllib.request.urlopen(request, timeout=600) as reply:
            answers += [p["outputs"] for p in json.loads(reply.read())["predictions"]]
    return answers


def serve_and_predict(flow: Flow, run: str, lines: Sequence[str]) -> list[str]:
    """Starts `t2t-serve --output_dir=RUN` (free ports), sends `lines` to its REST API and
    stops it (SIGTERM); its output goes to the log. Returns the answers."""
    command = [*tool_command("t2t-serve"), f"--output_dir={run}", f"--model_name={MODEL_NAME}",
               "--rest_api_port=0", "--port=0"]
    flow.commands.append(command)
    flow.log.write(f"$ {shlex.join(command)}\n")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace",
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    urls: list[str] = []
    serving = threading.Event()

    def copy_output() -> None:  # to the log, all along (a full pipe would stall the server)
        assert proc.stdout is not None
        for line in proc.stdout:
            flow.log.write(line)
            found = SERVING_URL.search(line)
            if found:
                urls.append(found.group(1))
                serving.set()
        serving.set()

    reader = threading.Thread(target=copy_output, daemon=True)
    reader.start()
    try:
        serving.wait(600)
        if not urls:
            raise StepError(f"t2t-serve stopped or did not serve within 600 s "
                               f"(log: {flow.log.name})")
        return predict(urls[0], MODEL_NAME, lines)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
        reader.join(60)
        flow.log.flush()


def read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()

def pretrained_import(flow: Flow) -> tuple[list[str], list[list[Any]]]:
    """The workflow (module docstring): its table, the imported model's figures against
    the fine-tuned one's; flow.runs["fine_tuned"] holds the dev evaluations (step 0:
    the imported weights)."""
    settings, timings, started = flow.settings, {}, time.monotonic()
    hf, run, data, text = (flow.path(name) for name in ("hf_model", "run", "data", "text"))
    for folder in (hf, run, data, text):  # a fresh import each time
        shutil.rmtree(folder, ignore_errors=True)
    run_python(flow, "prepare", f"--model_dir={hf}", f"--text_dir={text}",
               f"--tmp_dir={flow.tmp_dir}", f"--test_lines={settings.pretrained_test_lines}")
    timings["prepare"] = time.monotonic() - started
    timed(flow, timings, "import", "t2t-import", f"--from_dir={hf}", f"--output_dir={run}")
    source, reference = os.path.join(text, "test.en"), os.path.join(text, "test.vi")
    before = decode_scores(flow, timings, "decode", run, source, reference,
                           flow.path("test.imported.vi"), BEAM)
    timed(flow, timings, "datagen", "t2t-datagen", f"--problem={GETTEXT}",
          f"--use_vocab_from={run}", f"--data_dir={data}", f"--tmp_dir={flow.tmp_dir}")
    trainer = [f"--problem={GETTEXT}", f"--data_dir={data}", f"--output_dir={run}",
               "--eval_steps=0", "--eval_decode_examples=0"]
    timed(flow, timings, "evaluate", "t2t-trainer", "--schedule=evaluate", *trainer)
    timed(flow, timings, "fine-tune", "t2t-trainer", *trainer,
          f"--hparams=learning_rate_constant={LEARNING_RATE},batch_size={BATCH_SIZE}",
          f"--train_steps={settings.steps}", f"--local_eval_frequency={settings.eval_every}",
          "--deterministic", "--random_seed=1")
    evaluations = flow.runs["fine_tuned"] = read_eval_results(run)
    after = decode_scores(flow, timings, "decode", run, source, reference,
                          flow.path("test.fine_tuned.vi"), BEAM)
    timed(flow, timings, "export", "t2t-exporter", f"--output_dir={run}")
    _, record = latest_export(run)
    served = serving_agreement(flow, timings, run, record, read_lines(source))
    timings["total"] = time.monotonic() - started
    first, last = evaluations[0], evaluations[-1]
    rows: list[list[Any]] = [
        [f"test BLEU (beam 4, {len(read_lines(source))} lines)", before["bleu"], after["bleu"]],
        ["test chrF", before["chrf"], after["chrf"]],
        ["dev loss", first["loss"], last["loss"]],
        ["dev accuracy (per token)", first["accuracy"], last["accuracy"]],
        ["steps (the dev evaluations' steps)", int(first["step"]), int(last["step"])],
        ["export parity gate", "-", f"passed on {record['parity']['examples']} decodes"],
        ["t2t-serve answers == t2t-decoder's", "-",
         f"{served[0]}/{served[1]} ({served[2]} not empty)"],
        *[[f"wall time: {step} (s)", "-", int(round(seconds))]
          for step, seconds in timings.items()]]
    return ["measure", "imported", "fine-tuned"], rows


def serving_agreement(flow: Flow, timings: dict[str, float], run: str,
                      record: dict[str, Any], sources: Sequence[str]
                      ) -> tuple[int, int, int]:
    """The first Settings.served_lines `sources` through t2t-serve and through t2t-decoder
    with the export's decode settings: (equal answers, lines, answers not empty). Both are
    kept in the flow's folder (served.en, served.decoded.vi, served.answers.vi)."""
    lines = list(sources[:flow.settings.served_lines])
    source = write_lines(flow.path("served.en"), lines)
    decoded_path = flow.path("served.decoded.vi")
    timed(flow, timings, "decode", "t2t-decoder", f"--output_dir={run}",
          f"--decode_hparams={export_decode_hparams(record)}", f"--decode_from_file={source}",
          f"--decode_to_file={decoded_path}")
    start = time.monotonic()
    answers = serve_and_predict(flow, run, lines)
    timings["serve"] = time.monotonic() - start
    write_lines(flow.path("served.answers.vi"), answers)
    decoded = read_lines(decoded_path)
    equal = sum(a == d for a, d in zip(answers, decoded, strict=True))
    return equal, len(lines), sum(bool(a.strip()) for a in answers)



def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m regression.pretrained_workflow",
                                     description="Step 1 of the pretrained-import workflow.")
    parser.add_argument("step", choices=["prepare"])
    parser.add_argument("--model_dir", required=True, help="the Hugging Face folder to write")
    parser.add_argument("--text_dir", required=True, help="where test.en and test.vi go")
    parser.add_argument("--tmp_dir", default="/tmp", help="the problem's tmp_dir")
    parser.add_argument("--test_lines", type=int, default=0, help="0: the whole test split")
    args = parser.parse_args(argv)
    summary = prepare(args.model_dir, args.text_dir, args.tmp_dir, args.test_lines)
    print(f"Wrote a MarianMTModel to {args.model_dir}: {summary['parameters']:,} parameters, "
          f"{summary['vocab_size']} ids, tokenizer trained on {summary['train_pairs']} "
          f"train pairs; {summary['test_pairs']} test pairs in {args.text_dir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
