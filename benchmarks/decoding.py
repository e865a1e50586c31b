"""Decoding speed: greedy and beam search, cached vs uncached, by output length.

    python -m benchmarks.decoding [--quick] [--hparams_set transformer_tiny]
        [--shape seq2seq|decoder_only|both] [--batch_size 8] [--beam_size 4] [--lengths 32,128,512] [--repeats 3]
        [--budget 20] [--max_uncached_length N] [--onednn off|on|tf-default]

Builds a Transformer (random weights: decoding cost does not depend on training) for a
seq2seq symbol problem with a 1000-token vocabulary, and (`--shape`, default both) a
decoder-only one (a language model continuing empty prompts through
t2t.decoding.prompting: rows "lm_greedy", "lm_beam4"), and times `T2TModel.infer`
wrapped in a `tf.function`, traced once per (decoder, cache) configuration with the
input batch and the decode length as tensor arguments (the length is dynamic, as in
the decoder, so one trace serves every length). Tracing and a first warm-up call at
length 2 (graph optimization) are excluded from the timings.

Full-length decoding: an untrained model may emit EOS early, which would end greedy
decoding (all sequences finished) or beam search (no alive beam can beat a finished
one) before `decode_length`. The benchmarked model is a Transformer subclass whose two
step functions (`decode_step`, `decode_step_cached`) add -1e9 to the EOS logit, so EOS
never wins and every decode runs exactly `decode_length` steps; each measured output is
checked to contain no EOS. The extra add is one [B, V] op per step, negligible.

Each configuration runs `--repeats` times (median reported), but stops repeating once
its runs have taken `--budget` seconds: the uncached decoder at long lengths gets a
single run (`--max_uncached_length` skips it above a length). The full run takes
15-30 min on 2 shared CPUs, most of it the single uncached beam search at 512 (10-20
min); `--quick` (lengths 32 and 128, 2 repeats, 5 s budget) 1-2 min.
Reported per configuration:
- tokens/s: output tokens per second, batch_size * length / seconds (for beam search
  the top beam's tokens: beam_size hypotheses are scored per output token);
- ms/token: milliseconds per decoding step, seconds / length * 1000 (one step emits a
  token for each of the batch's sequences);
- speed-up: uncached seconds / cached seconds at the same length;
- cached ms/token at the longest length / at the shortest (~1 if cached steps cost the
  same whatever the length; an uncached step re-runs the encoder and the decoder on the
  whole [B, L] targets buffer, so its cost grows linearly with L, the decode's as L^2).
  A cached step still reads the L cached keys and values of every layer (attention is
  O(L) per token by definition), which at L=512 costs about as much as the rest of a
  transformer_tiny step for beam 4 (32 hypotheses): its ratio stays near 2 while
  greedy's is near 1. Each step writes its key/value in place
  (`attention.write_position`) and beam search never copies the caches
  (`beam_search.SLOTS`); before both, the ratios were 3.1 (greedy) and 4.0 (beam).
Times include the one encoder pass of each decode (inputs: `--input_length` tokens).
Decoder-only rows (2026-11-26): greedy's cached ratio is 1.05, beam 4's 3.28 (no
encoder-decoder attention dilutes the cost of attending over the cached positions).

oneDNN: `--onednn on` (the default) sets TF_ENABLE_ONEDNN_OPTS=1 before TensorFlow is
imported, which is TensorFlow's own default on x86; `off` measures Eigen's kernels
(slower batched matmuls, so the beam search's attention over slots is slower too);
`tf-default` leaves the variable as it is. Before the attention layer passed its
causal bias as [1, Tq, Tk], oneDNN made the [1, 1, Tq, Tk] bias add of the uncached
decoder (and of training) ~100x slower than the matmul, which is why this benchmark
used to default to off.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

EOS_ID = 1  # t2t_model.EOS_ID
_EOS_PENALTY = -1.0e9


@functools.cache
def full_length_transformer() -> type:
    """The Transformer class with the EOS logit pushed to -1e9 at each decoding step.

    Built on first use: TensorFlow is imported only once main() has chosen the oneDNN
    setting, which TensorFlow reads when first imported."""
    import tensorflow as tf

    from t2t.models import t2t_model, transformer

    assert t2t_model.EOS_ID == EOS_ID

    class FullLengthTransformer(transformer.Transformer):
        registered_name = "full_length_transformer"  # a name only: not registered

        def _no_eos(self, logits: tf.Tensor) -> tf.Tensor:
            vocab = self.problem_hparams.vocab_size["targets"]
            return logits + tf.one_hot(EOS_ID, vocab, on_value=_EOS_PENALTY, dtype=logits.dtype)

        def decode_step(self, previous_ids, index, state):
            logits, state = super().decode_step(previous_ids, index, state)
            return self._no_eos(logits), state

        def decode_step_cached(self, previous_ids, index, state):
            logits, state = super().decode_step_cached(previous_ids, index, state)
            return self._no_eos(logits), state

    return FullLengthTransformer


def onednn_enabled() -> bool:
    """Whether TensorFlow's oneDNN graph rewrites (and op fusions) are on."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def build_model(
    hparams_set: str = "transformer_tiny", vocab_size: int = 1000, seed: int = 0,
    decoder_only: bool = False,
) -> Any:
    """A seq2seq (or decoder-only: a language model) Transformer, EOS suppressed, in
    PREDICT mode with random weights."""
    import tensorflow as tf

    from t2t.data.problem import ProblemHParams
    from t2t.hparams import basic
    from t2t.models import t2t_model

    features = ("targets",) if decoder_only else ("inputs", "targets")
    php = ProblemHParams(modality={f: "symbol" for f in features},
                         vocab_size={f: vocab_size for f in features})
    tf.random.set_seed(seed)
    model = full_length_transformer()(basic.create_hparams(hparams_set), t2t_model.PREDICT, php)
    model.build_for({f: tf.fill([1, 2], 2) for f in features})
    return model


def make_decoder(model: Any, beam_size: int, use_cache: bool) -> Any:
    """A traced tf.function (inputs [B, S], decode_length) -> outputs [B, L]. A
    decoder-only model gets the inputs as its prompt (an empty [B, 0] prompt times the
    decoding alone)."""
    import tensorflow as tf

    from t2t.decoding import infer as infer_lib

    feature = "inputs" if model.has_inputs else "prompt"

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None], tf.int32),
            tf.TensorSpec([], tf.int32),
        ],
        reduce_retracing=True,
    )
    def decode(inputs: tf.Tensor, decode_length: tf.Tensor) -> tf.Tensor:
        return infer_lib.infer(
            model, {feature: inputs}, decode_length=decode_length, beam_size=beam_size,
            alpha=0.6, use_cache=use_cache,
        )["outputs"]

    return decode.get_concrete_function()


def measure(decode: Any, inputs: Any, length: int, repeats: int, budget_s: float) -> dict:
    """Median time of `repeats` decodes of `length` tokens (at least one; no more once
    their total reaches `budget_s`)."""
    import tensorflow as tf

    batch = int(inputs.shape[0])
    times: list[float] = []
    while not times or (len(times) < repeats and sum(times) < budget_s):
        start = time.perf_counter()
        outputs = decode(inputs, tf.constant(length, tf.int32)).numpy()
        times.append(time.perf_counter() - start)
        if outputs.shape != (batch, length) or (outputs == EOS_ID).any():
            raise AssertionError(f"decode did not run to length {length}: {outputs.shape}")
    seconds = statistics.median(times)
    return {
        "seconds": seconds,
        "min_seconds": min(times),
        "runs": len(times),
        "tokens_per_s": batch * length / seconds,
        "ms_per_token": seconds / length * 1000.0,
    }


def benchmark(
    hparams_set: str = "transformer_tiny",
    lengths: tuple[int, ...] = (32, 128, 512),
    batch_size: int = 8,
    beam_size: int = 4,
    input_length: int = 32,
    vocab_size: int = 1000,
    repeats: int = 3,
    budget_s: float = 20.0,
    seed: int = 0,
    decoders: tuple[str, ...] = ("greedy", "beam"),
    max_uncached_length: int | None = None,
    verbose: bool = False,
    decoder_only: bool = False,
) -> dict[str, Any]:
    """Times greedy and/or beam decoding, cached and uncached, at each length.

    The uncached decoder is not run at lengths above `max_uncached_length` (if given);
    those lengths then have no uncached figures and no speed-up.

    Returns {"results": {decoder: {"cached" | "uncached": {length: measure() dict}}},
    "speedup": {decoder: {length: uncached / cached seconds}}, "cached_flatness":
    {decoder: cached ms/token at max(lengths) / at min(lengths)}, "trace_s": {...},
    "config": {...}} where decoder is "greedy" or "beam<beam_size>". `decoder_only`:
    a language model continuing empty prompts (no encoder; `input_length` unused).
    """
    import tensorflow as tf

    model = build_model(hparams_set, vocab_size, seed, decoder_only)
    rng = np.random.default_rng(seed)
    inputs = rng.integers(2, vocab_size, [batch_size, input_length]).astype(np.int32)
    inputs[:, -1] = EOS_ID  # as the problems encode them
    inputs = tf.constant(inputs[:, :0] if decoder_only else inputs)
    names = {"greedy": ("greedy", 1), "beam": (f"beam{beam_size}", beam_size)}
    decoders_by_name = dict(names[d] for d in decoders)
    results: dict[str, dict[str, dict[int, dict]]] = {}
    trace_s: dict[str, float] = {}
    for name, beam in decoders_by_name.items():
        results[name] = {}
        for mode in ("cached", "uncached"):
            results[name][mode] = {}
            mode_lengths = [
                n for n in lengths
                if mode == "cached" or max_uncached_length is None or n <= max_uncached_length
            ]
            if not mode_lengths:
                continue
            start = time.perf_counter()
            decode = make_decoder(model, beam, use_cache=mode == "cached")
            decode(inputs, tf.constant(2, tf.int32)).numpy()  # warm-up: graph optimization
            trace_s[f"{name}/{mode}"] = time.perf_counter() - start
            for length in mode_lengths:
                r = measure(decode, inputs, length, repeats, budget_s)
                results[name][mode][length] = r
                if verbose:
                    print(f"  {name:>6} {mode:>8} L={length:<4} {r['seconds']:8.3f}s "
                          f"({r['runs']} run{'s' if r['runs'] > 1 else ''})", flush=True)
    speedup = {
        name: {
            n: by["uncached"][n]["seconds"] / by["cached"][n]["seconds"]
            for n in lengths
            if n in by["uncached"]
        }
        for name, by in results.items()
    }
    flatness = {
        name: by["cached"][max(lengths)]["ms_per_token"]
        / by["cached"][min(lengths)]["ms_per_token"]
        for name, by in results.items()
    }
    config = dict(
        hparams_set=hparams_set, lengths=list(lengths), batch_size=batch_size,
        beam_size=beam_size, input_length=input_length, vocab_size=vocab_size,
        repeats=repeats, budget_s=budget_s, max_uncached_length=max_uncached_length,
        decoder_only=decoder_only, cpus=os.cpu_count(), tensorflow=tf.__version__,
        devices=[d.device_type for d in tf.config.list_logical_devices()],
        onednn=onednn_enabled(),
    )
    return {"results": results, "speedup": speedup, "cached_flatness": flatness,
            "trace_s": trace_s, "config": config}


def format_table(figures: dict[str, Any]) -> str:
    results, speedup = figures["results"], figures["speedup"]
    lines = [
        f"{'decoder':<8} {'length':>6}  {'cached tok/s':>12} {'ms/tok':>8} {'runs':>4}  "
        f"{'uncached tok/s':>14} {'ms/tok':>8} {'runs':>4}  {'speed-up':>8}"
    ]
    for name, by in results.items():
        for length in by["cached"]:
            c, u = by["cached"][length], by["uncached"].get(length)
            uncached = (
                f"{u['tokens_per_s']:>14,.0f} {u['ms_per_token']:>8.2f} {u['runs']:>4}  "
                f"{speedup[name][length]:>7.1f}x"
                if u else f"{'(not run)':>14}"
            )
            lines.append(
                f"{name:<8} {length:>6}  {c['tokens_per_s']:>12,.0f} {c['ms_per_token']:>8.2f} "
                f"{c['runs']:>4}  " + uncached
            )
    lengths = figures["config"]["lengths"]
    for name, ratio in figures["cached_flatness"].items():
        lines.append(
            f"{name}: cached ms/token at length {max(lengths)} / at {min(lengths)} = {ratio:.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="lengths 32,128; 2 repeats")
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--lengths", default=None, help="comma-separated output lengths")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--input_length", type=int, default=32)
    parser.add_argument("--vocab_size", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=None, help="runs per configuration")
    parser.add_argument("--budget", type=float, default=None,
                        help="no further repeats once a configuration's runs took this long (s)")
    parser.add_argument("--max_uncached_length", type=int, default=None,
                        help="skip the uncached decoder above this length")
    parser.add_argument("--onednn", choices=["off", "on", "tf-default"], default="on",
                        help="TF_ENABLE_ONEDNN_OPTS (see the module doc); on by default")
    parser.add_argument("--shape", choices=["seq2seq", "decoder_only", "both"], default="both",
                        help="encoder-decoder rows, decoder-only (language model) rows, or both")
    args = parser.parse_args(argv)
    if args.onednn != "tf-default":
        if "tensorflow" in sys.modules:
            print(f"TensorFlow already imported: --onednn {args.onednn} may not apply.")
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if args.onednn == "on" else "0"
    lengths = tuple(int(n) for n in (args.lengths or ("32,128" if args.quick else "32,128,512"))
                    .split(","))
    repeats = args.repeats or (2 if args.quick else 3)
    budget = args.budget if args.budget is not None else (5.0 if args.quick else 20.0)

    shapes = ["seq2seq", "decoder_only"] if args.shape == "both" else [args.shape]
    merged: dict[str, Any] = {}
    for shape in shapes:
        print(f"{shape}:", flush=True)
        figures = _run_shape(args, lengths, repeats, budget, shape == "decoder_only")
        merged = merge_shapes(merged, figures, "lm_" if shape == "decoder_only" else "")
    return merged


def merge_shapes(merged: dict[str, Any], figures: dict[str, Any], prefix: str) -> dict[str, Any]:
    """One result of both model shapes: decoder-only decoders are named "lm_<decoder>"
    (results, speedup, cached_flatness, trace_s); "config" is the first shape's, the
    others' under "config_<prefix>"."""
    if not merged:
        renamed = {k: ({f"{prefix}{name}": v for name, v in figures[k].items()}
                       if k in ("results", "speedup", "cached_flatness", "trace_s") else figures[k])
                   for k in figures}
        return renamed
    out = dict(merged)
    for key in ("results", "speedup", "cached_flatness", "trace_s"):
        out[key] = {**merged[key], **{f"{prefix}{name}": v for name, v in figures[key].items()}}
    out[f"config_{prefix.rstrip('_') or 'seq2seq'}"] = figures["config"]
    out["total_s"] = merged.get("total_s", 0.0) + figures.get("total_s", 0.0)
    return out


def _run_shape(args: argparse.Namespace, lengths: tuple[int, ...], repeats: int,
               budget: float, decoder_only: bool) -> dict[str, Any]:
    start, load_before = time.perf_counter(), os.getloadavg()
    figures = benchmark(
        hparams_set=args.hparams_set, lengths=lengths, batch_size=args.batch_size,
        beam_size=args.beam_size, input_length=args.input_length,
        vocab_size=args.vocab_size, repeats=repeats, budget_s=budget,
        max_uncached_length=args.max_uncached_length, verbose=True, decoder_only=decoder_only,
    )
    figures["load_average_before"] = list(load_before)
    figures["load_average"] = list(os.getloadavg())
    figures["total_s"] = time.perf_counter() - start
    print()
    print(format_table(figures))
    c = figures["config"]
    shape = ("decoder-only (a language model continuing empty prompts)" if decoder_only
             else f"encoder-decoder, inputs {c['input_length']} tokens")
    print(
        f"\n{c['hparams_set']}, vocab {c['vocab_size']}, batch {c['batch_size']}, "
        f"{shape}, beam alpha 0.6; EOS suppressed (full-length). "
        f"Median of up to {repeats} runs (runs columns), no more once {budget:g}s spent. "
        f"tok/s = batch * length / s; ms/tok = s / length.\n"
        f"Tracing + warm-up (excluded): "
        + ", ".join(f"{k} {v:.1f}s" for k, v in figures["trace_s"].items())
        + f".\n{c['cpus']} CPUs, TensorFlow {c['tensorflow']}, devices {c['devices']}, "
        f"oneDNN opts {'on' if c['onednn'] else 'off'}; "
        f"load average (1, 5, 15 min) before {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.2f}' for x in figures['load_average'])}; "
        f"total {figures['total_s']:.0f}s."
    )
    return figures


if __name__ == "__main__":
    main()
