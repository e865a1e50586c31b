"""Encoder-decoder attention heat maps: what each output token looked at in the input.

    weights = attention_weights(model, input_ids, output_ids)  # [B, layers, heads, T, S]
    maps = maps_for_texts(decoder, ["1 0 1"], ["1 0 1"])        # [AttentionMap]
    write_html("out.attention.html", maps, title="transformer on algorithmic_...")

The model is run once more, teacher-forced on (input ids, output ids + EOS): row t of a
map is the attention of the step that predicts output token t (the last row: EOS), over
the input tokens (EOS included). Outputs given as text are encoded again with the
problem's targets encoder, so a map shows the attention paid while producing that
text, whichever decode (beam search, sampling) found it. t2t-decoder writes these with
`--decode_hparams=write_attention=true`; t2t-serve's page draws the same weights from an
export's "attention" signature (t2t.serving.serving_module).
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from absl import logging

from t2t.decoding import decoder as decoder_lib
from t2t.features import EOS_ID, PAD_ID, Modality

ROUND_DIGITS = 4  # weights in the HTML file: enough for a heat map, a smaller file


class AttentionError(decoder_lib.DecodeError):
    """A model or problem without encoder-decoder attention to show."""


@dataclasses.dataclass
class AttentionMap:
    """One example: source tokens [S], target tokens [T], weights float32 [layers, heads, T, S]."""

    source_tokens: list[str]
    target_tokens: list[str]
    weights: np.ndarray


def check_model(model: Any, model_name: str | None = None) -> None:
    """AttentionError unless the model has encoder-decoder attention over text inputs."""
    name = model_name or type(model).__name__
    php = model.problem_hparams
    modality = php.modality
    if php.is_language_model or "inputs" not in modality:
        raise AttentionError(f"write_attention: {name} on a problem without inputs (a language "
                             f"model) has no encoder-decoder attention to show.")
    if modality.get("inputs") != Modality.SYMBOL or modality.get("targets") != Modality.SYMBOL:
        raise AttentionError(
            f"write_attention: heat maps need text inputs and text targets; this problem has "
            f"{modality.get('inputs')} inputs and {modality.get('targets')} targets.")
    if not getattr(model, "has_encdec_attention", False):
        raise AttentionError(f"write_attention: model {name} has no per-layer encoder-decoder "
                             f"attention to show (use an encoder-decoder transformer).")


def attention_weights(model: Any, input_ids: Any, output_ids: Any) -> np.ndarray:
    """float32 [B, layers, heads, T, S] of ids input_ids [B, S] (EOS included, 0-padded)
    and output_ids [B, T] (the tokens to predict, EOS included, 0-padded).

    Rows of padded output positions are computed too; padded input positions get 0."""
    import tensorflow as tf

    check_model(model)
    inputs = np.asarray(input_ids, np.int32)
    outputs = np.asarray(output_ids, np.int32)
    if inputs.ndim != 2 or outputs.ndim != 2 or len(inputs) != len(outputs):
        raise ValueError(f"attention_weights needs ids [B, S] and [B, T] of one batch size; got "
                         f"shapes {inputs.shape} and {outputs.shape}.")
    try:
        weights = model.encdec_attention_weights(
            {"inputs": tf.constant(inputs), "targets": tf.constant(outputs)})
    except ValueError as e:
        raise AttentionError(f"write_attention: {e}") from None
    return weights.numpy()


def token_strings(encoder: Any, ids: Sequence[int]) -> list[str]:
    """One display string per id: the encoder's token ("<EOS>" for EOS), "" for PAD."""
    out = []
    for i in (int(x) for x in ids):
        if i == PAD_ID:
            out.append("")
        elif i == EOS_ID:
            out.append("<EOS>")
        elif encoder is None:  # t2t's Decoder without an encoder: raw integers
            out.append(str(i))
        else:
            out.append(encoder.decode_list([i])[0])
    return out


def _encode_output(encoder: Any, text: str, line: int) -> list[int]:
    try:
        ids = encoder.encode(text) if encoder is not None else [int(w) for w in text.split()]
    except ValueError as e:
        raise AttentionError(f"write_attention: output {line} ({text!r}) cannot be encoded "
                             f"again with the targets encoder: {e}") from None
    return [*ids, EOS_ID]


def _padded(rows: list[Sequence[int]]) -> np.ndarray:
    out = np.full([len(rows), max(len(r) for r in rows)], PAD_ID, np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def maps_for_texts(decoder: decoder_lib.Decoder, inputs: Sequence[str],
                   outputs: Sequence[str]) -> list[AttentionMap]:
    """The attention map of each (input text, output text), batched as the decoder is."""
    check_model(decoder.model)
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs.")
    verbosity = logging.get_verbosity()
    logging.set_verbosity(logging.ERROR)  # decoding already warned about these lines
    try:
        source = [list(decoder.encode_text(text, i + 1)) for i, text in enumerate(inputs)]
    finally:
        logging.set_verbosity(verbosity)
    target_encoder = decoder.encoders.get("targets")
    target = [_encode_output(target_encoder, text, i + 1) for i, text in enumerate(outputs)]
    maps = []
    size = decoder.decode_hparams.batch_size
    for start in range(0, len(source), size):
        src, tgt = source[start:start + size], target[start:start + size]
        weights = attention_weights(decoder.model, _padded(src), _padded(tgt))
        for row, (s, t) in enumerate(zip(src, tgt, strict=True)):
            maps.append(AttentionMap(
                source_tokens=token_strings(decoder.input_encoder, s),
                target_tokens=token_strings(target_encoder, t),
                weights=weights[row, :, :, : len(t), : len(s)]))
    return maps


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; }
select { margin-right: 1rem; }
table.heat { border-collapse: collapse; margin-top: 1rem; font-size: .8rem; }
table.heat td { width: 2.2rem; height: 1.4rem; text-align: center; border: 1px solid #eee; }
table.heat th { font-weight: normal; padding: 0 .3rem; white-space: pre; }
table.heat thead th { writing-mode: vertical-rl; transform: rotate(180deg); }
.muted { color: #666; }
</style></head><body>
<h1>__TITLE__</h1>
<p class="muted">Encoder-decoder attention: one row per output token (the step that
predicts it), one column per input token; darker is more attention.</p>
<label>Example <select id="example"></select></label>
<label>Layer <select id="layer"></select></label>
<label>Head <select id="head"></select></label>
<div id="map"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const $ = (id) => document.getElementById(id);
function fill(select, count, label) {
  select.innerHTML = "";
  for (let i = 0; i < count; i++) select.add(new Option(label(i), String(i)));
}
function draw() {
  const ex = data.examples[Number($("example").value)];
  const w = ex.weights[Number($("layer").value)][Number($("head").value)];
  const table = document.createElement("table");
  table.className = "heat";
  const head = table.createTHead().insertRow();
  head.appendChild(document.createElement("th"));
  for (const s of ex.source) { const th = document.createElement("th"); th.textContent = s; head.appendChild(th); }
  const body = table.createTBody();
  ex.target.forEach((t, i) => {
    const tr = body.insertRow();
    const th = document.createElement("th"); th.textContent = t; tr.appendChild(th);
    w[i].forEach((v, j) => {
      const td = tr.insertCell();
      td.title = `${t} -> ${ex.source[j]}: ${v}`;
      td.dataset.weight = String(v);
      td.style.background = `rgba(30, 80, 200, ${v})`;
      td.style.color = v > 0.5 ? "white" : "#333";
      td.textContent = Math.round(v * 100);
    });
  });
  $("map").replaceChildren(table);
}
fill($("example"), data.examples.length, (i) => `${i + 1}: ${data.examples[i].source.join(" ")}`);
fill($("layer"), data.layers, (i) => `${i}`);
fill($("head"), data.heads, (i) => `${i}`);
for (const id of ["example", "layer", "head"]) $(id).addEventListener("change", draw);
if (data.examples.length) draw();
</script></body></html>
"""


def render_html(maps: Sequence[AttentionMap], title: str = "Attention") -> str:
    """A self-contained HTML page (no external script) with an example/layer/head picker."""
    layers, heads = (maps[0].weights.shape[:2] if maps else (0, 0))
    data = {"layers": int(layers), "heads": int(heads), "examples": [
        {"source": m.source_tokens, "target": m.target_tokens,
         "weights": np.round(m.weights.astype(np.float64), ROUND_DIGITS).tolist()}
        for m in maps]}
    # "<" escaped: a token such as "</script>" cannot end the data block.
    text = json.dumps(data, ensure_ascii=False).replace("<", "\\u003c")
    before, after = (part.replace("__TITLE__", html.escape(title))
                     for part in _PAGE.split("__DATA__"))
    return before + text + after


def write_html(path: str, maps: Sequence[AttentionMap], title: str = "Attention") -> None:
    """Writes render_html(maps, title) to path (atomically)."""
    decoder_lib.write_lines(path, [render_html(maps, title)])
