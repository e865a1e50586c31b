"""The CTranslate2 export's parity gate: CTranslate2 must decode as t2t's Decoder does.

On dev inputs (ids cut to max_input_length + EOS; a language model: the first halves
of dev examples as prompts, and an empty prompt) the exported
folder (ctranslate2.Translator / Generator, 2 threads) and t2t's Decoder on the same
checkpoint decode one input at a time, each with t2t's length budget (input length
with EOS + extra_length; a language model: max_new_tokens, else extra_length), twice:

  greedy   beam_size 1;
  beam     beam_size GATE_BEAM_SIZE (or the --decode_hparams beam_size when larger),
           alpha 0 and CTranslate2's length_penalty 0: both rank hypotheses by their
           log-probability (with alpha > 0 they differ by design: t2t divides by
           ((5 + length) / 6) ** alpha, CTranslate2 by length ** length_penalty).

float32: every greedy output must be equal and its score (log-probability, EOS
included) within parity_core.SCORE_TOLERANCE, and every beam output equal to t2t's must
have t2t's score, else ParityError. Beam outputs may differ, and are counted, not
gated: t2t's beam search (as Tensor2Tensor's) finishes hypotheses among the best
2 * beam_size candidates of a step and stops when no alive beam can beat the worst
finished one; CTranslate2 finishes only those among the best beam_size and stops once
beam_size hypotheses finished (patience 1). So t2t may find a short, better-scored
output that CTranslate2 never considered (seen with a 4-token vocabulary). int8 /
int16: the agreement rate (outputs equal to t2t's) of both searches is reported, never
refused: rounding weights to 8 bits changes near-ties, more in small models (a
hidden_size 16 test model agreed on ~80-100% of greedy decodes); judge the printed rate
(and your own metric) before serving it. Sentences per second of both (one input at a
time, so dominated by per-call overhead for small models) are recorded too.

Not compared: an empty source ([EOS] alone): CTranslate2's Translator returns an empty
output with score 0 without decoding it, where t2t decodes it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from t2t.config import DecodeHParams
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.decoding import decoder as decoder_lib
from t2t.features import EOS_ID, PAD_ID, RESERVED_TOKENS
from t2t.serving import parity_core

# The export folder's facts the gate reads (t2t.serving.ctranslate2_export writes them).
INFO_FILE = "t2t_ctranslate2.json"
PAD_TOKEN, EOS_TOKEN = RESERVED_TOKENS[PAD_ID], RESERVED_TOKENS[EOS_ID]
SEQ2SEQ, LANGUAGE_MODEL = "seq2seq", "language_model"

GATE_BEAM_SIZE = 4
THREADS = 2


def parity_inputs(problem: problem_lib.Problem, data_dir: str | None, count: int, kind: str,
                  max_input_length: int) -> list[list[int]]:
    """Dev inputs as t2t's Decoder takes them: ids cut to max_input_length + EOS; a
    language model: prompt ids (first half of each dev example, its last
    max_input_length ids) and the empty prompt."""
    from t2t.serving import parity

    dev = [text_encoder.strip_extraneous(e["ids"])
           for e in parity.dev_examples(problem, data_dir, count, False)]
    if kind == LANGUAGE_MODEL:
        return [*(ids[: max(1, len(ids) // 2)][-max_input_length:] for ids in dev), []]
    return [[*ids[:max_input_length], EOS_ID] for ids in dev if ids]


class Runner:
    """An exported folder decoding t2t ids one input at a time: (ids without EOS, score)."""

    def __init__(self, folder: str, threads: int = THREADS):
        import ctranslate2

        with open(os.path.join(folder, INFO_FILE), encoding="utf-8") as f:
            info = json.load(f)
        self.kind = info["kind"]
        self.source_tokens, self.target_tokens = info["source_tokens"], info["target_tokens"]
        self.target_ids = {t: i for i, t in enumerate(self.target_tokens)}
        engine = (ctranslate2.Generator if self.kind == LANGUAGE_MODEL
                  else ctranslate2.Translator)
        self.engine = engine(folder, device="cpu", inter_threads=1, intra_threads=threads)

    def decode(self, ids: Sequence[int], beam_size: int, budget: int) -> tuple[list[int], float]:
        """Input ids (seq2seq: ending in EOS; language model: a prompt) -> output ids up to
        EOS and their log-probability, with t2t's budget of output tokens (EOS counted)."""
        if self.kind == LANGUAGE_MODEL:
            start = [PAD_TOKEN, *(self.target_tokens[i] for i in ids)]
            result = self.engine.generate_batch(
                [start], max_length=budget, beam_size=beam_size, length_penalty=0.0,
                min_length=0, include_prompt_in_result=False, return_scores=True)[0]
            tokens = result.sequences[0]
        else:
            source = [self.source_tokens[i] for i in ids]
            result = self.engine.translate_batch(
                [source], beam_size=beam_size, length_penalty=0.0, max_decoding_length=budget,
                min_decoding_length=0, return_scores=True)[0]
            tokens = result.hypotheses[0]
        return [self.target_ids[t] for t in tokens], float(result.scores[0])


@dataclasses.dataclass
class SearchResult:
    """One search (greedy or beam) over the gate's inputs."""

    name: str
    beam_size: int
    agreed: int = 0
    t2t_better: int = 0  # differing outputs where t2t's scores higher (beam: by design)
    differences: list[str] = dataclasses.field(default_factory=list)
    score_differences: int = 0  # equal outputs with scores apart
    ctranslate2_seconds: float = 0.0
    t2t_seconds: float = 0.0

    def summary(self, examples: int) -> dict[str, Any]:
        return {"beam_size": self.beam_size, "examples": examples, "agreed": self.agreed,
                "t2t_better": self.t2t_better,
                "agreement": self.agreed / max(examples, 1),
                "ctranslate2_sentences_per_second": examples / max(self.ctranslate2_seconds, 1e-9),
                "t2t_sentences_per_second": examples / max(self.t2t_seconds, 1e-9)}


def _budget(decoder: decoder_lib.Decoder, ids: Sequence[int], kind: str) -> int:
    """The Decoder's output tokens for one input (EOS counted)."""
    longest = 0 if kind == LANGUAGE_MODEL else len(ids)
    return decoder.settings.new_tokens(longest)


def _run_search(runner: Runner, problem: problem_lib.Problem, model: Any, data_dir: str | None,
                dhp: DecodeHParams, inputs: list[list[int]], result: SearchResult) -> None:
    """Decodes `inputs` with both; counts agreements, lists differences (outputs, and
    scores of equal outputs)."""
    settings = dataclasses.replace(dhp, batch_size=1, beam_size=result.beam_size, alpha=0.0,
                                   return_beams=False, temperature=0.0, num_samples=1)
    decoder = decoder_lib.Decoder(problem, model, data_dir, settings)
    arrays = [np.asarray(ids, np.int32) for ids in inputs]
    decoder.decode_features(arrays[:1])  # traced before timing
    start = time.perf_counter()
    with parity_core.quiet("absl"):
        wants = decoder.decode_features(arrays)
    result.t2t_seconds = time.perf_counter() - start
    runner.decode(inputs[0], result.beam_size, _budget(decoder, inputs[0], runner.kind))
    for ids, want in zip(inputs, wants, strict=True):
        start = time.perf_counter()
        out, score = runner.decode(ids, result.beam_size, _budget(decoder, ids, runner.kind))
        result.ctranslate2_seconds += time.perf_counter() - start
        text = decoder.target_text(np.asarray([*out, EOS_ID]))
        problems = []
        if text != want.text:
            problems.append(f"output {text!r} ({score:.4f}) != t2t {want.text!r} "
                            f"({want.score:.4f})")
            result.t2t_better += score < want.score
        else:
            result.agreed += 1
        if text == want.text and not parity_core.scores_close(score, want.score):
            result.score_differences += 1
            problems.append(f"score {score:.5f} != t2t {want.score:.5f}")
        if problems:
            result.differences.append(f"{result.name} input {list(ids)}: " + "; ".join(problems))


def check_parity(folder: str, problem: problem_lib.Problem, model: Any, data_dir: str | None,
                 dhp: DecodeHParams, num_examples: int) -> dict[str, Any]:
    """Runs the gate (module doc) on `folder`; ParityError when a float32 export fails
    it. Returns
    {"quantization", "examples", "searches": {"greedy"|"beam": summary}}."""
    from t2t.decoding import settings as settings_lib

    runner = Runner(folder)
    with open(os.path.join(folder, INFO_FILE), encoding="utf-8") as f:
        quantization = json.load(f)["quantization"]
    exact = quantization == "float32"
    max_input_length = settings_lib.resolve(dhp, model).max_input_length
    inputs = parity_inputs(problem, data_dir, num_examples, runner.kind, max_input_length)
    searches = [SearchResult("greedy", 1),
                SearchResult("beam", max(GATE_BEAM_SIZE, dhp.beam_size))]
    for search in searches:
        _run_search(runner, problem, model, data_dir, dhp, inputs, search)
    summaries = {s.name: s.summary(len(inputs)) for s in searches}
    for search in searches:
        summaries[search.name]["differences"] = search.differences[:5]
    greedy, beam = searches
    failed = len(greedy.differences) + beam.score_differences
    if exact and failed:
        shown = "\n  ".join([*greedy.differences, *beam.differences][:10])
        raise parity_core.ParityError(
            f"PARITY CHECK FAILED: the CTranslate2 float32 model differs from t2t's Decoder "
            f"in {failed} of {2 * len(inputs)} searches (greedy outputs or scores; "
            f"scores of equal beam outputs); the export at {folder} was deleted.\n  {shown}")
    return {"quantization": quantization, "examples": len(inputs), "threads": THREADS,
            "searches": summaries}


def report_lines(parity: dict[str, Any] | None) -> list[str]:
    """The gate's figures as t2t-exporter prints them."""
    if not parity:
        return ["Parity check skipped."]
    exact = parity["quantization"] == "float32"
    lines = [f"Parity check passed on {parity['examples']} inputs ("
             f"{'outputs and scores equal to' if exact else 'agreement with'} t2t's Decoder, "
             f"one input at a time, {parity['threads']} threads):"]
    for name in ("greedy", "beam"):
        s = parity["searches"][name]
        lines.append(
            f"  {name} (beam_size {s['beam_size']}): {s['agreed']}/{s['examples']} equal "
            f"({s['agreement']:.1%}); {s['ctranslate2_sentences_per_second']:.1f} sentences/s "
            f"CTranslate2 vs {s['t2t_sentences_per_second']:.1f} t2t")
        lines += [f"    {d}" for d in s.get("differences", [])]
    if parity["searches"]["beam"]["agreed"] < parity["examples"]:
        lines.append("  (beam outputs may differ by design: see t2t.serving.ctranslate2_parity)")
    return lines
