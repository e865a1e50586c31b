"""Decode speed of one trained run through each engine t2t offers, on the same sentences.

    python -m benchmarks.serving_decode [--output_dir RUN] [--train_steps 1500]
        [--sentences 400] [--beams 1,4] [--threads 2] [--batch_size 32]

Engines, each decoding the same dev sentences (sorted longest first, in batches of
`--batch_size`, as t2t-decoder batches them) with `--threads` CPU threads:

  t2t-decoder          t2t's Decoder in-process (the checkpoint, tf.function per batch)
  SavedModel           t2t-exporter's export, its serving_default signature (text in, text out)
  CTranslate2 float32  t2t-exporter --format=ctranslate2 (Translator.translate_batch)
  CTranslate2 int8     the same with --quantization=int8

Each engine is warmed up on the first batch (tracing, graph optimisation), then times one
pass over every sentence. Beam search runs with alpha 0 everywhere: t2t's length penalty
((5 + length) / 6) ** alpha and CTranslate2's length ** length_penalty differ, and alpha 0
(CTranslate2's length_penalty 0) ranks hypotheses by log-probability in both. The
budget is t2t's: the batch's longest input + extra_length (50). Reported per engine and
beam: sentences/s, seconds, and the fraction of outputs equal to t2t-decoder's.

Without --output_dir it trains `transformer_small` on translate_envi_gettext8k (English ->
Vietnamese from the machine's gettext catalogs, offline) for --train_steps steps first.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

PROBLEM = "translate_envi_gettext8k"
HPARAMS_SET = "transformer_small"
HPARAMS = "learning_rate_warmup_steps=500,batch_size=2048"
ENGINES = ("t2t-decoder", "SavedModel", "CTranslate2 float32", "CTranslate2 int8")


def _run(*command: str) -> str:
    """Runs a t2t binary; its output is shown only on failure, and returned."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"{' '.join(command)} failed with status {done.returncode}")
    return done.stdout


def train(root: str, steps: int) -> tuple[str, str]:
    """(run, data_dir) of transformer_small trained `steps` steps on PROBLEM."""
    data_dir, run = os.path.join(root, "data"), os.path.join(root, "run")
    _run("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={data_dir}",
         f"--tmp_dir={os.path.join(root, 'tmp')}")
    started = time.time()
    _run("t2t-trainer", f"--problem={PROBLEM}", "--model=transformer",
         f"--hparams_set={HPARAMS_SET}", f"--hparams={HPARAMS}", f"--train_steps={steps}",
         f"--local_eval_frequency={steps}", "--eval_steps=20", f"--data_dir={data_dir}",
         f"--output_dir={run}", "--random_seed=1")
    print(f"trained {HPARAMS_SET} {steps} steps in {time.time() - started:.0f} s", flush=True)
    return run, data_dir


def export_all(run: str, data_dir: str, beams: list[int], root: str) -> dict[str, str]:
    """The version folders: SavedModel per beam size ("saved_model/B") and CTranslate2
    float32 / int8 (beam size is a call argument there)."""
    folders: dict[str, str] = {}
    common = (f"--output_dir={run}", f"--data_dir={data_dir}")
    for beam in beams:
        export_dir = os.path.join(root, f"saved_model_beam{beam}")
        if _has_version(export_dir):  # --work_dir of an earlier run
            folders[f"saved_model/{beam}"] = _newest(export_dir)
            continue
        _run("t2t-exporter", *common, f"--export_dir={export_dir}",
             f"--decode_hparams=beam_size={beam},alpha=0")
        folders[f"saved_model/{beam}"] = _newest(export_dir)
    for quantization in ("float32", "int8"):
        export_dir = os.path.join(root, f"ctranslate2_{quantization}")
        if _has_version(export_dir):
            folders[f"ctranslate2/{quantization}"] = _newest(export_dir)
            continue
        printed = _run("t2t-exporter", *common, "--format=ctranslate2",
                       f"--quantization={quantization}", f"--export_dir={export_dir}")
        gate = printed[printed.find("Parity"):] if "Parity" in printed else ""
        print(f"CTranslate2 {quantization}: " + gate.strip(), flush=True)
        folders[f"ctranslate2/{quantization}"] = _newest(export_dir)
    return folders


def _has_version(export_dir: str) -> bool:
    return any(p.isdigit() for p in os.listdir(export_dir)) if os.path.isdir(export_dir) else False


def _newest(export_dir: str) -> str:
    versions = [p for p in glob.glob(os.path.join(export_dir, "*")) if p.split("/")[-1].isdigit()]
    if not versions:
        raise SystemExit(f"no version folder in {export_dir}")
    return max(versions, key=lambda p: int(os.path.basename(p)))


def dev_sentences(problem: Any, data_dir: str, count: int) -> list[str]:
    """The first `count` dev inputs as text, longest (in tokens) first."""
    from t2t.data import problem as problem_lib
    from t2t.data.encoders import text_encoder

    encoder = problem.feature_encoders(data_dir)["inputs"]
    dataset = problem.dataset(problem_lib.EVAL, data_dir, shuffle_files=False,
                              deterministic=True)
    rows = [text_encoder.strip_extraneous(ex["inputs"].tolist())
            for ex in dataset.take(count).as_numpy_iterator()]
    rows.sort(key=lambda ids: -len(ids))
    return [encoder.decode(ids) for ids in rows]


def _batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def time_decoder(run: str, data_dir: str, problem: Any, sentences: list[str], beam: int,
                 batch_size: int) -> tuple[float, list[str]]:
    """(seconds, outputs) of t2t's Decoder on the run's latest checkpoint."""
    from t2t.config import DecodeHParams
    from t2t.decoding import decoder as decoder_lib
    from t2t.hparams.basic import create_hparams

    hparams = create_hparams(HPARAMS_SET, HPARAMS)
    model = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    dhp = DecodeHParams(beam_size=beam, alpha=0.0, batch_size=batch_size)
    decoder = decoder_lib.Decoder(problem, model, data_dir, dhp)
    decoder.decode_texts(sentences[:batch_size])  # traces the batch decode
    started = time.perf_counter()
    results = decoder.decode_texts(sentences)
    return time.perf_counter() - started, [r.text for r in results]


def time_saved_model(folder: str, sentences: list[str], batch_size: int
                     ) -> tuple[float, list[str]]:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the SentencePiece ops the export uses

    serve = tf.saved_model.load(folder).signatures["serving_default"]
    batches = _batches(sentences, batch_size)
    serve(inputs=tf.constant(batches[0]))
    outputs: list[str] = []
    started = time.perf_counter()
    for batch in batches:
        result = serve(inputs=tf.constant(batch))["outputs"].numpy()
        outputs += [text.decode("utf-8") for text in result]
    return time.perf_counter() - started, outputs


def time_ctranslate2(folder: str, sentences: list[str], beam: int, batch_size: int,
                     threads: int, extra_length: int = 50) -> tuple[float, list[str]]:
    import ctranslate2

    from t2t.serving.ctranslate2_export import Vocabulary

    vocabulary = Vocabulary(folder)
    translator = ctranslate2.Translator(folder, device="cpu", inter_threads=1,
                                        intra_threads=threads)
    batches = _batches(sentences, batch_size)

    def translate(batch: list[str]) -> list[str]:
        tokens = [vocabulary.tokenize(s) for s in batch]
        results = translator.translate_batch(
            tokens, beam_size=beam, length_penalty=0.0, min_decoding_length=0,
            max_decoding_length=max(map(len, tokens)) + extra_length)
        return [vocabulary.detokenize(r.hypotheses[0]) for r in results]

    translate(batches[0])
    outputs: list[str] = []
    started = time.perf_counter()
    for batch in batches:
        outputs += translate(batch)
    return time.perf_counter() - started, outputs


def measure(run: str, data_dir: str, folders: dict[str, str], sentences: list[str],
            beams: list[int], batch_size: int, threads: int) -> list[dict[str, Any]]:
    from t2t import registry

    problem = registry.problem(PROBLEM)
    rows = []
    for beam in beams:
        timed = {"t2t-decoder": time_decoder(run, data_dir, problem, sentences, beam, batch_size),
                 "SavedModel": time_saved_model(folders[f"saved_model/{beam}"], sentences,
                                                batch_size)}
        for quantization in ("float32", "int8"):
            timed[f"CTranslate2 {quantization}"] = time_ctranslate2(
                folders[f"ctranslate2/{quantization}"], sentences, beam, batch_size, threads)
        reference = timed["t2t-decoder"][1]
        for engine in ENGINES:
            seconds, outputs = timed[engine]
            same = sum(a == b for a, b in zip(outputs, reference, strict=True))
            rows.append({"engine": engine, "beam_size": beam, "sentences": len(sentences),
                         "seconds": round(seconds, 2),
                         "sentences_per_s": round(len(sentences) / seconds, 1),
                         "speedup_vs_t2t_decoder": round(timed["t2t-decoder"][0] / seconds, 2),
                         "same_as_t2t_decoder": round(same / len(sentences), 4)})
            print(_row_text(rows[-1]), flush=True)
    return rows


def _row_text(row: dict[str, Any]) -> str:
    return (f"| {row['engine']} | {row['beam_size']} | {row['sentences_per_s']:.1f} | "
            f"{row['seconds']:.2f} | {row['speedup_vs_t2t_decoder']:.2f}x | "
            f"{100 * row['same_as_t2t_decoder']:.1f}% |")


def _set_threads(threads: int) -> None:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", help=f"a trained {HPARAMS_SET} run of {PROBLEM} "
                        "(default: train one)")
    parser.add_argument("--data_dir", help="its data (default: the run's datagen folder)")
    parser.add_argument("--train_steps", type=int, default=1500)
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--beams", default="1,4")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--work_dir", help="where the exports go (default: a temporary "
                        "folder); exports found there are reused")
    args = parser.parse_args(argv)
    beams = [int(b) for b in args.beams.split(",")]
    _set_threads(args.threads)
    from t2t import registry

    with tempfile.TemporaryDirectory(prefix="t2t-decode-bench-") as scratch:
        root = args.work_dir or scratch
        if args.output_dir:
            run, data_dir = args.output_dir, args.data_dir or os.path.join(root, "data")
            if not args.data_dir:
                raise SystemExit("--output_dir needs --data_dir (the run's t2t-datagen folder)")
        else:
            run, data_dir = train(root, args.train_steps)
        folders = export_all(run, data_dir, beams, root)
        sentences = dev_sentences(registry.problem(PROBLEM), data_dir, args.sentences)
        print(f"{len(sentences)} dev sentences, batches of {args.batch_size}, "
              f"{args.threads} threads", flush=True)
        print("| engine | beam | sentences/s | seconds | vs t2t-decoder | same output |")
        print("|---|---|---|---|---|---|")
        rows = measure(run, data_dir, folders, sentences, beams, args.batch_size, args.threads)
    figures = {"rows": rows, "config": {"problem": PROBLEM, "hparams_set": HPARAMS_SET,
                                        "sentences": len(sentences), "threads": args.threads,
                                        "batch_size": args.batch_size, "beams": beams}}
    print(json.dumps({f"{r['engine']} beam {r['beam_size']}": r["sentences_per_s"]
                      for r in rows}))
    return figures


if __name__ == "__main__":
    main()
