"""`text2text_pretrained`: the problem of an imported model before it is fine-tuned.

t2t-import writes a run folder RUN whose problem is this one and whose data_dir is RUN
itself: the vocabulary is RUN/vocab.pretrained.json (the model's "inputs" and "targets"
SentencePiece models, t2t.data.encoders.pretrained_vocab), so t2t-decoder, t2t-exporter
and t2t-serve with --output_dir=RUN encode and decode text as the imported model does.
It has no data: to fine-tune, prepare a problem of your own with that vocabulary
(t2t-datagen --use_vocab_from=RUN) and train it from RUN.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_core as text_problems
from t2t.data.encoders import pretrained_vocab


@registry.register_problem
class Text2textPretrained(text_problems.Text2TextProblem):
    """An imported model's vocabulary (data_dir's vocab.pretrained.json) and no data.

    Fine-tune on a problem of yours prepared with t2t-datagen --use_vocab_from=RUN."""

    vocab_type = "pretrained"  # what the catalog shows; the vocabulary is always imported

    @property
    def pretrained_vocab_prefix(self) -> str:
        """The run folder's record, vocab.pretrained.json (not a problem's copy)."""
        return pretrained_vocab.RECORD_PREFIX

    @property
    def vocab_filename(self) -> str:
        return f"{pretrained_vocab.RECORD_PREFIX}.json"

    def uses_pretrained_vocab(self, data_dir: str | None) -> bool:
        return True

    def pretrained_encoders(self, data_dir: str | None, *,
                            create: bool = False) -> dict[str, Any]:
        """The run folder's encoders (data_dir = the imported run); nothing is copied."""
        if data_dir is None:
            raise problem.DataMissingError(
                f"{self.name} reads the imported model's vocabulary from data_dir (the run "
                f"folder t2t-import wrote); pass data_dir.")
        hint = (f"{self.name} is the problem of a run t2t-import wrote, and data_dir "
                f"({data_dir}) must be that run's folder: give its --output_dir to "
                f"t2t-decoder, or import the model again (t2t-import)")
        try:
            return pretrained_vocab.load_pretrained_encoders(data_dir, self.pretrained_vocab_prefix,
                                                             hint=hint)
        except FileNotFoundError as e:
            raise problem.DataMissingError(str(e)) from e

    def _no_data_error(self, folder: str | None) -> problem.DataMissingError:
        """Why there is nothing to generate, with the fine-tuning commands (`folder`: the
        imported run when known)."""
        is_run = folder is not None and pretrained_vocab.has_pretrained_vocab(folder)
        run = folder if is_run else "RUN"
        return problem.DataMissingError(
            f"{self.name} is an imported model's vocabulary, with no data of its own. To "
            f"fine-tune the model, prepare a problem P of yours with that vocabulary, then "
            f"train from the run: `t2t-datagen --problem=P --use_vocab_from={run} "
            f"--data_dir=D`, then `t2t-trainer --problem=P --data_dir=D --output_dir={run}`.")

    def generate_samples(self, data_dir: str, tmp_dir: str,
                         dataset_split: str) -> Iterator[dict[str, Any]]:
        raise self._no_data_error(data_dir)

    def generate_data(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None,
                      max_cases: int | None = None, num_shards: int | None = None,
                      progress: bool = True) -> dict[str, Any]:
        """Refuses (DataMissingError): there is nothing to generate; says how to fine-tune."""
        raise self._no_data_error(self.use_vocab_from or data_dir)

    def parity_texts(self, data_dir: str, count: int) -> list[str]:
        """`count` inputs for t2t-exporter's parity gate, which decodes dev examples and
        this problem has none: each line the text of 6 whole-word pieces of the source
        model, in the model's own order (its most probable words first for a unigram
        model), so an export of a just-imported run is checked on words it knows."""
        encoder = self.pretrained_encoders(data_dir)["inputs"]
        pieces = encoder.decode_list(range(encoder.vocab_size))
        words = [piece[1:] for i, piece in enumerate(pieces)
                 if piece.startswith("\u2581") and piece[1:].isalpha()
                 and encoder.encode(piece[1:]) == [i]]  # a word the source model segments so
        return [" ".join(words[start:start + 6]) for start in range(0, 6 * count, 6)
                if words[start:start + 6]]
