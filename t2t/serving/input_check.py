"""Refusing text an exported model cannot read, before it is queued: HTTP 400 (gRPC
INVALID_ARGUMENT) naming the tokens or bytes, instead of a confident answer to an input
the in-graph tokenizer silently emptied.

    check = InputCheck.for_export(servable.info)    # from assets.extra/t2t_export.json
    if check is not None:
        check.check(request)                        # RequestError(..., 400) or nothing

The export's t2t_export.json records the input encoder ("encoders") and the model's
vocabulary sizes ("problem_hparams"), so the check needs no model call. It applies to
the text "inputs" of every signature that takes them (serving_default, attention; a
language model's generate and score, whose inputs are prompts of the targets encoder).
Refused, as t2t-decoder warns about them (t2t.decoding.unreadable_text finds both):

  token vocabularies (no replace_oov)  tokens outside the vocabulary; an empty input
  plain integer ids (text encoder)     words that are not integers, ids beyond the
                                       vocabulary; an empty input
  every text encoder but byte          bytes that are not UTF-8 (the graph would read
                                       them as U+FFFD)

A language model's empty prompt is a prompt (no text), never refused. Exports made to
map unknown input are not refused, and their answers carry no flag: a byte encoder reads
any bytes, a character encoder maps unknown characters to its UNK id, a subword encoder
escapes them ("\\NNN;"), SentencePiece maps unknown pieces to <unk>, a token vocabulary
with replace_oov maps unknown tokens to that token. Image, audio and ids-only
(tf.Example) inputs are not text: not checked here.
"""

from __future__ import annotations

from typing import Any

from absl import logging

from t2t.data.encoders import text_encoder
from t2t.decoding.unreadable_text import TextReader
from t2t.serving.rest_api import PredictRequest, RequestError

TEXT_INPUT = "inputs"  # the text input of an export's signatures
SHOWN_TEXT = 60  # characters of a refused input quoted back


class InputCheck:
    """Refuses the text inputs one export's model cannot read (module docstring).
    `reader`: the encoder's words (None: it reads any text); `refuse_empty`: an empty
    input is refused."""

    def __init__(self, reader: TextReader | None, *, refuse_empty: bool):
        self.reader, self.refuse_empty = reader, refuse_empty

    @classmethod
    def for_export(cls, info: dict[str, Any]) -> InputCheck | None:
        """The check for an export's t2t_export.json `info`; None when there is nothing
        to check (no text inputs, or a byte encoder: it reads any bytes)."""
        try:
            return cls._from_info(info)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            logging.warning("t2t-serve: inputs are not checked against the vocabulary: "
                            "t2t_export.json's encoder cannot be read (%s: %s)",
                            type(e).__name__, e)
            return None

    @classmethod
    def _from_info(cls, info: dict[str, Any]) -> InputCheck | None:
        php = info.get("problem_hparams") or {}
        modality = php.get("modality") or {}
        language_model = "inputs" not in modality and modality.get("targets") == "symbol"
        feature = "targets" if language_model else "inputs"
        if modality.get(feature) != "symbol" or "encoders" not in info:
            return None
        description = info["encoders"].get(feature)
        kind = "text" if description is None else description["type"]
        if kind == "task_token":
            kind = description["base"]["type"]
        if kind == "byte":
            return None
        if kind not in ("token", "text"):  # reads any text: only UTF-8 is checked
            return cls(None, refuse_empty=False)
        encoder = text_encoder.build_encoder(description, "") if description else None
        reader = TextReader(encoder, vocab_size=(php.get("vocab_size") or {}).get(feature),
                            in_graph=True)
        if reader.reads_any_text:  # a token vocabulary with replace_oov
            return cls(None, refuse_empty=False)
        return cls(reader, refuse_empty=not language_model)

    def problem(self, value: Any) -> str | None:
        """Why the model cannot read one input (bytes or text), or None."""
        if isinstance(value, bytes):
            try:
                text = value.decode("utf-8")
            except UnicodeDecodeError as e:
                bad = value[e.start:e.end]
                return (f"{_shown(value)} is not valid UTF-8 (byte(s) {bad.hex(' ')} at "
                        f"offset {e.start}); this model reads UTF-8 text: send the text "
                        "itself, not {\"b64\": ...} of other bytes")
        else:
            text = str(value)
        if self.reader is None:
            return None
        if self.refuse_empty and not self.reader.words(text):
            return (f"the input {_shown(text)} is empty; this model reads "
                    f"{self.reader.readable()} (an empty input has no answer it was "
                    "trained for)")
        unreadable = self.reader.unreadable(text)
        if unreadable is None:
            return None
        return (f"{_shown(text)}: {unreadable.message} of this model; it reads "
                f"{unreadable.readable} (t2t-decoder warns about such lines and decodes "
                "them as empty inputs)")

    def check(self, request: PredictRequest) -> None:
        """RequestError(400) naming the first input the model cannot read, if any."""
        values = request.inputs.get(TEXT_INPUT)
        info = request.signature.inputs.get(TEXT_INPUT)
        if values is None or info is None or info.dtype != "string":
            return
        flat = values.reshape(-1)
        for index, value in enumerate(flat):
            reason = self.problem(value)
            if reason is None:
                continue
            more = sum(self.problem(v) is not None for v in flat[index + 1:])
            where = f"instances[{index}]" if request.row_format else f"inputs[{index}]"
            also = f" ({more} more input(s) of this request cannot be read either)" if more else ""
            raise RequestError(f"{where}: {reason}{also}", 400)


def _shown(value: str | bytes) -> str:
    """An input quoted for an error message, cut to SHOWN_TEXT characters."""
    text = repr(value[:SHOWN_TEXT])
    return text + ("..." if len(value) > SHOWN_TEXT else "")
