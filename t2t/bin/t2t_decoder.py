"""t2t-decoder: decode with a trained model, from a file, interactively or on the dev set.

  t2t-decoder --problem=translate_ende_wmt32k --model=transformer \\
      --hparams_set=transformer_base --output_dir=RUN \\
      --decode_hparams="beam_size=4,alpha=0.6" \\
      --decode_from_file=newstest.en --decode_to_file=newstest.de \\
      --decode_reference=newstest.ref.de  # prints sacrebleu BLEU and chrF, and writes
                                          # them to DECODE_TO_FILE.scores.json

  # A problem whose metrics include ROUGE (summarize_*): ROUGE-1/2/L too (rouge-score:
  # pip install 't2t[summarization]'), printed and in DECODE_TO_FILE.scores.json;
  # a speech problem: WER and CER (jiwer: pip install 't2t[speech]'), lines = audio paths
  t2t-decoder --output_dir=CNN_RUN --decode_from_file=articles.txt \\
      --decode_reference=summaries.txt

  t2t-decoder --output_dir=RUN --decode_interactive   # one line in, one line out; q quits
  t2t-decoder --output_dir=RUN --eval_steps=2         # dev batches, side by side

  # A language model: each line of the file is a prompt; 3 samples per prompt
  t2t-decoder --output_dir=LM_RUN --decode_from_file=prompts.txt \\
      --decode_hparams="temperature=0.8,top_p=0.95,num_samples=3,max_new_tokens=200,seed=1"
  t2t-decoder --output_dir=LM_RUN --score_file=heldout.txt   # log-probabilities, perplexity,
                                                             # bits per byte
  # An image-target model (imagetransformer): 4 samples per class of a `_rev` problem
  # (--decode_from_file: the classes, one per line; img2img_*: low-resolution image
  # paths), a PNG grid (rows: classes) and one PNG per sample
  t2t-decoder --output_dir=GEN_RUN --decode_hparams="num_samples=4,temperature=1.0,seed=1" \\
      --decode_to_file=samples.png

  # Tensor2Tensor's decode hparams: part 1 of 4 of a file (T2T's split file in.txt001 if
  # present) into out.txt001; lines 'INPUT<TAB>TARGET PREFIX' continued after the prefix
  t2t-decoder --output_dir=RUN --decode_from_file=in.txt --decode_to_file=out.txt \\
      --decode_hparams="shards=4,shard_id=1,partial_targets=true"

The weights come from --checkpoint_path (a prefix or a directory) or else the latest
checkpoint in --output_dir. --problem, --model, --hparams_set, --hparams, --data_dir and
--t2t_usr_dir default to the ones the run in --output_dir recorded (run.json,
hparams.json): `t2t-decoder --output_dir=RUN` needs nothing else. A flag given wins.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time

import numpy as np
from absl import flags

from t2t import config
from t2t.bin import common_flags, config_flags, ensemble_flags, flag_help, run_flags
from t2t.features import Modality

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(run_flags)  # --help lists the run and decode flags too
flags.adopt_module_key_flags(ensemble_flags)

flags.DEFINE_string("decode_from_file", None, "Decode each line of this file (each record "
                    "between --decode_hparams=delimiter=...; with partial_targets=true "
                    "'INPUT<TAB>TARGET PREFIX'; with shards=N,shard_id=K T2T's split file "
                    "DECODE_FROM_FILE%03d (K) if present, else the K-th of N parts). A language "
                    "model continues each line (a prompt; an empty line: none). Lines longer "
                    "than max_input_length tokens are cut with a warning (an input keeps its "
                    "first tokens, a prompt its last); invalid UTF-8 is replaced with a "
                    "warning; an empty file is refused.")
flags.DEFINE_string("decode_to_file", None, "Where to write the decodes, a file, one line per "
                    "input line (default: DECODE_FROM_FILE.MODEL.HPARAMS_SET.PROBLEM.beamN."
                    "alphaA.decodes; with shards=N: the suffix %03d of shard_id, as T2T). "
                    "Written to DECODE_TO_FILE.partial (progress in .partial.json) until "
                    "complete: a killed decode run again with the same flags continues where "
                    "it stopped. Image generation: the grid's PNG file (NAME.png; default "
                    "OUTPUT_DIR/samples_PROBLEM_stepN.png), one PNG per sample in the folder "
                    "NAME/.")
flags.DEFINE_string("decode_reference", None, "References of --decode_from_file, one per "
                    "line: print sacrebleu BLEU and chrF with their signatures, and ROUGE-1/2/L "
                    "(F, P, R) where the problem's metrics include ROUGE (summarize_*); "
                    "written to DECODE_TO_FILE.scores.json.")
flags.DEFINE_bool("decode_interactive", False, "Read lines (a language model: prompts) from "
                  "stdin and answer each; EOF or 'q' quits.")
flags.DEFINE_string("score_file", None, "Score each line of this file instead of decoding "
                    "(a language model: the text; seq2seq: 'source<TAB>target'): writes its "
                    "log-probability (nats) to SCORE_FILE.scores, one per line, and prints the "
                    "corpus's per-token NLL, perplexity and bits per byte (also in "
                    "SCORE_FILE.scores.json).")
flags.DEFINE_string("decode_split", None, "Without --decode_from_file: the split to decode "
                    "(default dev; e.g. test). A language model continues the first half of "
                    "each example.")
flags.DEFINE_integer("eval_steps", 1, "Without --decode_from_file: dev batches to decode "
                     "(<= 0: the whole dev split), printed and written to "
                     "OUTPUT_DIR/decode_SPLIT.{inputs,targets,outputs}.txt (SPLIT: "
                     "--decode_split, default dev).")

flag_help.group("Decoding", "decode_from_file", "decode_to_file", "decode_reference",
                "decode_interactive", "score_file", "decode_split", "eval_steps",
                "decode_hparams")


@dataclasses.dataclass
class _Files:
    """What a run reads and writes, settled before anything loads: the file decoded and
    its part (k, n) or None (the whole file), and the decodes file or image grid."""

    source: str | None = None
    part: tuple[int, int] | None = None
    output: str | None = None


def _shard_suffix(dhp) -> str:
    return f"{dhp.shard_id:03d}" if dhp.shards > 1 else ""


def _file_decode_files(dhp, model: str, hparams_set: str, problem: str) -> _Files:
    """--decode_from_file's input (T2T's shard file FILE%03d when shards > 1 and it
    exists, else FILE and the part to decode) and DECODE_TO_FILE (with the shard
    suffix), checked: FileNotFoundError, DecodeError or a one-line exit."""
    from t2t.bin import output_paths
    from t2t.decoding import decoder as decoder_lib

    source, part = os.path.expanduser(FLAGS.decode_from_file), None
    split_file = source + _shard_suffix(dhp)
    if dhp.shards > 1 and os.path.isfile(split_file):
        source = split_file  # T2T's files split beforehand
    elif dhp.shards > 1:
        part = (dhp.shard_id, dhp.shards)
    if not os.path.isfile(source):
        raise FileNotFoundError(f"--decode_from_file={FLAGS.decode_from_file!r}: no such file.")
    if os.path.getsize(source) == 0:
        raise decoder_lib.DecodeError(f"--decode_from_file={source!r} is empty: nothing to "
                                      f"decode (one input or prompt per line).")
    if FLAGS.decode_reference and dhp.shards > 1:
        common_flags.fail("--decode_reference scores a whole decode: concatenate the shards' "
                          "decodes in order (cat OUT000 OUT001 ... > OUT), then t2t-bleu "
                          "--translation=OUT --reference=REF.")
    if dhp.write_attention and (dhp.partial_targets or dhp.num_decodes > 1):
        common_flags.fail("write_attention maps one decode of each input: not with "
                          "partial_targets=true or num_decodes > 1.")
    output = (os.path.expanduser(FLAGS.decode_to_file) + _shard_suffix(dhp)
              if FLAGS.decode_to_file else
              f"{FLAGS.decode_from_file}{_shard_suffix(dhp)}.{model}.{hparams_set}.{problem}"
              f".beam{dhp.beam_size}.alpha{dhp.alpha:g}.decodes")
    output_paths.check_file("decode_to_file", os.path.expanduser(output))
    return _Files(source, part, os.path.expanduser(output))


def _image_grid_file(problem, dhp, output_dir: str, checkpoint: str) -> _Files:
    """Image generation's grid PNG (--decode_to_file, else in the run) and the folder
    of its samples (the grid's name without .png), checked: a one-line exit."""
    from t2t.bin import output_paths

    wrong = [name for name, on in (("partial_targets", dhp.partial_targets),
                                   ("shards", dhp.shards > 1)) if on]
    if wrong:
        common_flags.fail(f"{problem.name} generates images: {', '.join(wrong)} apply to text "
                          f"decoding; leave them out of --decode_hparams.")
    step = checkpoint.rsplit("-", 1)[-1]
    grid = os.path.expanduser(FLAGS.decode_to_file or os.path.join(
        output_dir, f"samples_{problem.name}_step{step}.png"))
    if not grid.lower().endswith(".png"):
        common_flags.fail(f"--decode_to_file={FLAGS.decode_to_file}: {problem.name} generates "
                          f"images: give the grid's PNG file (e.g. --decode_to_file={grid}.png); "
                          f"one PNG per sample then goes in the folder {grid}/.")
    output_paths.check_file("decode_to_file", grid)
    folder = os.path.splitext(grid)[0]
    if os.path.exists(folder) and not os.path.isdir(folder):
        common_flags.fail(f"--decode_to_file={grid}: {folder}, where the samples go, is a file, "
                          f"not a folder: move it or give another grid name.")
    return _Files(output=grid)


def _planned_files(problem, dhp, names: tuple[str, str, str], data_dir: str,
                   output_dir: str, checkpoint: str) -> _Files:
    """Every output path flag of this run checked (t2t.bin.output_paths: a folder where
    a file is wanted, a missing parent folder, no permission: one line, exit 1) before
    anything loads. names: (model, hparams_set, problem name)."""
    from t2t.bin import output_paths

    chosen = "--decode_interactive" if FLAGS.decode_interactive else (
        "--score_file" if FLAGS.score_file else None)
    unused = [key for key, on in (("shards", dhp.shards > 1),
                                  ("num_decodes", dhp.num_decodes > 1 and FLAGS.score_file)) if on]
    if chosen and unused:
        common_flags.fail(f"{' and '.join(unused)} apply to --decode_from_file and the dev set, "
                          f"not {chosen}: leave them out of --decode_hparams.")
    if FLAGS.score_file:
        output_paths.check_file("score_file", os.path.expanduser(FLAGS.score_file) + ".scores")
        return _Files()
    if problem.hparams(data_dir).modality.get("targets") == Modality.IMAGE:
        return _image_grid_file(problem, dhp, output_dir, checkpoint)
    if FLAGS.decode_from_file:
        return _file_decode_files(dhp, *names)
    if not FLAGS.decode_interactive:  # the dev set's decodes go in the run
        output_paths.check_dir("output_dir", output_dir)
    return _Files()


def _print_scores(scores: dict) -> None:
    print("\n".join(scores["report"]), flush=True)


def _scores_record(scores: dict, lines: int, reference_path: str) -> dict:
    """DECODE_TO_FILE.scores.json's fields; ROUGE's and WER/CER's only where computed."""
    record = {"bleu": scores["bleu"], "chrf": scores["chrf"], "lines": lines,
              "bleu_signature": scores["bleu_signature"],
              "chrf_signature": scores["chrf_signature"], "reference": reference_path}
    if "rouge" in scores:
        record.update(scores["rouge"], rouge_signature=scores["rouge_signature"])
    if "error_rates" in scores:  # speech problems: WER/CER (t2t.decoding.speech_metrics)
        record.update(wer=scores["wer"], cer=scores["cer"], error_rates=scores["error_rates"],
                      error_rates_signature=scores["error_rates_signature"])
    return record


def _decode_file(decoder, files: _Files) -> None:
    """Decodes files.source (its part) into files.output; attention maps and scores."""
    from t2t.decoding import decoder as decoder_lib
    from t2t.decoding import input_records

    dhp = decoder.decode_hparams
    input_path, output_path = files.source, files.output
    references = None
    if FLAGS.decode_reference:  # read first: a bad reference fails before decoding
        reference_path = os.path.expanduser(FLAGS.decode_reference)
        if not os.path.isfile(reference_path):
            raise FileNotFoundError(f"--decode_reference={FLAGS.decode_reference!r}: no such file.")
        references = input_records.read_records(reference_path, dhp.record_delimiter)
    start = time.monotonic()
    count = decoder.decode_file(input_path, output_path, files.part)
    elapsed = time.monotonic() - start
    part = f" (part {files.part[0]} of 0..{files.part[1] - 1})" if files.part else ""
    print(f"Decoded {count} lines of {input_path}{part} in {elapsed:.1f} s "
          f"({count / max(elapsed, 1e-9):.1f} lines/s): {output_path}", flush=True)
    if dhp.write_attention:  # the best output of each line (beams: the first column)
        outputs = [line.split("\t")[0] if "\t" in line else line
                   for line in decoder_lib.read_text_lines(output_path)]
        inputs = [record for _, chunk in input_records.iter_record_chunks(
            input_path, dhp.record_delimiter, part=files.part) for record in chunk]
        _write_attention(decoder, inputs, outputs, output_path + ".attention.html")
    if references is not None:
        if dhp.return_beams or dhp.write_beam_scores or dhp.num_samples > 1:
            outputs = [line.split("\t")[0] for line in decoder_lib.read_text_lines(output_path)]
        else:
            outputs = decoder_lib.read_text_lines(output_path)
        # num_decodes passes: each pass scored against the references
        scores = decoder_lib.score_decodes(outputs, references * dhp.num_decodes,
                                           decoder.problem.eval_metrics())
        _print_scores(scores)
        scores_path = output_path + ".scores.json"
        decoder_lib.write_lines(scores_path, [json.dumps(
            _scores_record(scores, count, reference_path), indent=1)])
        print(f"Scores written to {scores_path}", flush=True)


def _score_file(problem, model, data_dir: str, dhp) -> None:
    from t2t.decoding import scoring

    input_path = os.path.expanduser(FLAGS.score_file)
    if not os.path.isfile(input_path):
        raise FileNotFoundError(f"--score_file={FLAGS.score_file!r}: no such file.")
    scorer = scoring.Scorer(problem, model, data_dir, batch_size=dhp.batch_size)
    output_path = input_path + ".scores"
    start = time.monotonic()
    corpus = scorer.score_file(input_path, output_path)
    scoring.write_corpus_score(output_path + ".json", corpus)
    print(f"Scored {corpus.lines} lines ({corpus.tokens} tokens, {corpus.bytes} bytes) of "
          f"{input_path} in {time.monotonic() - start:.1f} s: log-probabilities in {output_path}",
          flush=True)
    print(f"nll_per_token {corpus.nll_per_token:.4f} nats  perplexity {corpus.perplexity:.3f}  "
          f"bits_per_byte {corpus.bits_per_byte:.4f}  (written to {output_path}.json)", flush=True)


def _write_attention(decoder, inputs: list[str], outputs: list[str], path: str) -> None:
    from t2t.decoding import attention_maps

    maps = attention_maps.maps_for_texts(decoder, inputs, outputs)
    title = f"{type(decoder.model).__name__} on {decoder.problem.name}: attention"
    attention_maps.write_html(path, maps, title)
    print(f"Attention heat maps of {len(maps)} outputs written to {path}", flush=True)


def _decode_dev(decoder, output_dir: str) -> None:
    from t2t.decoding import decoder as decoder_lib
    from t2t.decoding import text_metrics
    from t2t.utils import optional_deps

    split = FLAGS.decode_split or "dev"
    triples = decoder.decode_dev_set(FLAGS.eval_steps, split)
    for i, (inputs, targets, outputs) in enumerate(triples):
        print(f"[{i}] inputs:  {inputs}\n    targets: {targets}\n    outputs: {outputs}")
    os.makedirs(output_dir, exist_ok=True)
    stem = f"decode_{split}{_shard_suffix(decoder.decode_hparams)}"  # shards: decode_dev001
    for k, name in enumerate(("inputs", "targets", "outputs")):
        decoder_lib.write_lines(os.path.join(output_dir, f"{stem}.{name}.txt"),
                                [decoder_lib.one_line(t[k], False) for t in triples])
    exact = sum(t == o for _, t, o in triples) / max(len(triples), 1)
    print(f"Decoded {len(triples)} {split} examples: exact match {exact:.4f}; written to "
          f"{os.path.join(output_dir, f'{stem}.{{inputs,targets,outputs}}.txt')}",
          flush=True)
    if decoder.decode_hparams.write_attention:
        _write_attention(decoder, [t[0] for t in triples], [t[2] for t in triples],
                         os.path.join(output_dir, f"{stem}.attention.html"))
    if triples and not decoder.is_class_label and not decoder.is_language_model:
        metric_names = decoder.problem.eval_metrics()
        if text_metrics.wants_rouge(metric_names):
            try:
                text_metrics.require_rouge()
            except optional_deps.MissingDependencyError as e:  # the decodes are written
                print(f"note: ROUGE skipped: {e}", file=sys.stderr, flush=True)
                metric_names = ()
        _print_scores(decoder_lib.score_decodes([t[2] for t in triples],
                                                [t[1] for t in triples], metric_names))


def _sample_images(problem, model, dhp, data_dir: str, grid_path: str) -> None:
    """Image targets: num_samples (times num_decodes) images per class / input /
    unconditional row, written as one PNG each and a grid at `grid_path`
    (t2t.decoding.image_samples)."""
    from t2t.decoding import decoder as decoder_lib
    from t2t.decoding import image_inputs, image_samples
    from t2t.decoding import settings as settings_lib

    php = model.problem_hparams
    kind = None if model.hparams.get("unconditional", False) else php.modality.get("inputs")
    wanted = None
    if FLAGS.decode_from_file:
        wanted = [line for line in decoder_lib.read_text_lines(
            os.path.expanduser(FLAGS.decode_from_file)) if line.strip()]
        if kind is None or not wanted:
            raise decoder_lib.DecodeError(
                f"--decode_from_file={FLAGS.decode_from_file!r}: {problem.name} "
                + ("samples unconditionally (it has nothing to condition on): leave the "
                   "flag out." if kind is None else "names no class or image to sample from."))
    height, width, channels = php.image_shape
    shown = None
    if kind == Modality.CLASS_LABEL:
        try:
            conditions, names = image_samples.class_rows(list(problem.class_labels), wanted)
        except ValueError as e:
            raise decoder_lib.DecodeError(str(e)) from None
    elif kind == Modality.IMAGE:
        size = [problem.input_size, problem.input_size, channels]
        if wanted:
            names = wanted
            conditions = np.stack([image_inputs.read_input(w, size, f"line {i + 1}")
                                   for i, w in enumerate(wanted)])
        else:
            dataset = problem.dataset("eval", data_dir, deterministic=True)
            conditions = np.stack([e["inputs"] for e in dataset.take(dhp.batch_size)
                                   .as_numpy_iterator()])
            names = [f"dev_{i}" for i in range(len(conditions))]
        shown = image_samples.upsample(conditions, height, width)
    else:
        conditions, names = None, ["unconditional"]
    settings = settings_lib.resolve(dhp, model)  # the model's sampling_method too
    if settings.temperature <= 0:
        print("note: temperature=0 picks the most likely value of every sub-pixel (greedy): "
              "pass --decode_hparams=temperature=1.0 to sample.", file=sys.stderr, flush=True)
    start = time.monotonic()
    images, scores = image_samples.sample_images(  # num_decodes passes: more sample numbers
        model, conditions, dhp.num_samples * dhp.num_decodes, temperature=settings.temperature,
        top_k=settings.top_k, top_p=dhp.top_p, seed=dhp.seed if dhp.seed >= 0 else None,
        batch_size=dhp.batch_size)
    elapsed = time.monotonic() - start
    paths = image_samples.write_samples(
        image_samples.Samples(images, names, scores, shown), grid_path)
    dims = height * width * channels
    bits = -float(np.mean(scores)) / dims / math.log(2.0)
    print(f"Sampled {images.shape[0]} x {images.shape[1]} images of {height}x{width}x{channels} "
          f"in {elapsed:.1f} s ({elapsed / max(len(paths), 1):.2f} s per image; "
          f"{bits:.3f} bits/dim under the model): grid {grid_path}, one PNG per sample in "
          f"{os.path.splitext(grid_path)[0]}/", flush=True)


def main(argv: list[str]) -> None:
    if not common_flags.start(argv):
        return
    if FLAGS.decode_reference and not FLAGS.decode_from_file:
        common_flags.fail("--decode_reference scores --decode_from_file's decodes: give both.")
    chosen = [name for name in ("decode_interactive", "decode_from_file", "score_file")
              if getattr(FLAGS, name)]
    if len(chosen) > 1:
        common_flags.fail(f"{' and '.join('--' + c for c in chosen)}: choose one.")
    if FLAGS.decode_split and chosen:
        common_flags.fail(f"--decode_split chooses the split decoded without a file; it does "
                          f"not apply to --{chosen[0]}.")
    if FLAGS["eval_steps"].present and chosen:  # e.g. the trainer's flags, passed here too
        print(f"note: t2t-decoder ignores --eval_steps with --{chosen[0]} (it counts the dev "
              f"batches decoded without a file)", file=sys.stderr, flush=True)
    from t2t import registry
    from t2t.data import multi_problem
    from t2t.data import problem as problem_lib
    from t2t.decoding import decoder as decoder_lib
    from t2t.decoding import speech_metrics, text_metrics
    from t2t.hparams.hparams import HParamsError, MissingHParamError
    from t2t.utils import optional_deps

    task = config_flags.build(config.TaskConfig)
    try:
        output_dir = os.path.expanduser(task.output_dir) if task.output_dir else None
        problem_name, model_name, hparams_set, hparams = common_flags.resolve_run(
            output_dir, task.problem, task.model, task.hparams_set, task.hparams)
        if output_dir is None:
            output_dir = common_flags.default_run_dir(problem_name, model_name, hparams_set)
        data_dir = common_flags.resolve_data_dir(task.data_dir, output_dir)
        dhp = config.DecodeHParams.parse(FLAGS.decode_hparams)
        checkpoint, members = ensemble_flags.resolve_checkpoints(output_dir, dhp.write_attention)
        problem = multi_problem.select_task(registry.problem(problem_name), FLAGS.decode_task)
        registry.model(model_name)
        files = _planned_files(problem, dhp, (model_name, hparams_set, problem_name), data_dir,
                               output_dir, checkpoint)
        if FLAGS.decode_reference and text_metrics.wants_rouge(problem.eval_metrics()):
            text_metrics.require_rouge()  # before the model loads and the decoding
        if FLAGS.decode_reference and speech_metrics.wants_error_rates(problem.eval_metrics()):
            optional_deps.require("jiwer", "speech", "WER/CER")
        # On stderr: stdout carries the decodes (interactive answers, dev triples).
        common_flags.print_locations(data_dir, output_dir, sys.stderr)
        if dhp.write_attention and (FLAGS.score_file or FLAGS.decode_interactive):
            common_flags.fail("write_attention writes the heat maps of --decode_from_file's "
                              "or the dev set's decodes; not with --score_file or "
                              "--decode_interactive.")
        model = ensemble_flags.load_models(problem, members, model_name, hparams, data_dir)
        if dhp.write_attention:
            from t2t.decoding import attention_maps

            attention_maps.check_model(model, model_name)  # before any decoding
        if FLAGS.score_file:
            _score_file(problem, model, data_dir, dhp)
            return
        if model.problem_hparams.modality.get("targets") == Modality.IMAGE:
            if FLAGS.decode_interactive or FLAGS.score_file:
                common_flags.fail(f"{problem.name} generates images: sample them with "
                                  f"--decode_hparams=num_samples=N,temperature=T (and "
                                  f"--decode_from_file naming classes or images).")
            _sample_images(problem, model, dhp, data_dir, files.output)
            return
        decoder = decoder_lib.Decoder(problem, model, data_dir, dhp)
        if FLAGS.decode_interactive:
            sys.stderr.write(f"Decoding with {model_name} from {checkpoint} "
                             f"({dhp.to_string()}); one input per line, 'q' or EOF quits.\n")
            decoder.interactive()
        else:
            sys.stderr.write(f"Decoding with {model_name} from {checkpoint}\n")
            if FLAGS.decode_from_file:
                _decode_file(decoder, files)
            else:
                _decode_dev(decoder, output_dir)
    except (registry.UnknownNameError, HParamsError, MissingHParamError, problem_lib.DataMissingError,
            decoder_lib.DecodeError, FileNotFoundError, multi_problem.TaskChoiceError) as e:
        common_flags.fail(str(e))
    except KeyboardInterrupt:
        sys.exit(130)


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-decoder")
    flag_help.run(main, __doc__, hidden=("data_mirror",))


if __name__ == "__main__":
    run()
