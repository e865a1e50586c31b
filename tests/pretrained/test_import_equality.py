"""Imported checkpoints equal transformers' own models (issue 52, point 2).

For each architecture (conftest.CHECKPOINTS) a tiny random model made and saved by
`transformers` is imported with t2t-import's `import_checkpoint`, then on real sentences
(gettext messages the tokenizers never saw; one padded batch):
  tokenization: the run's encoders give the tokenizer's own ids;
  logits (teacher forcing) equal transformers' within 1e-4 (in t2t's id order);
  greedy decoding equals `generate(num_beams=1, do_sample=False)`;
  beam search (4 beams, alpha 0) equals `generate(num_beams=4, length_penalty=0.0,
  early_stopping=False)` up to the rules below, ids and scores;
  the text t2t makes of its ids (the run's targets encoder, as t2t-decoder does) equals
  `tokenizer.decode(ids, skip_special_tokens=True)`.

The two beam searches (t2t.decoding.beam_search, Tensor2Tensor's, and transformers 5.x's
generation.utils._beam_search) are one algorithm for the alive beams: extend each by
every token, keep the 2 * beams best candidates by summed log-probability, continue the
best `beams` that did not end in EOS. alpha=0 makes t2t's penalty ((5+len)/6)**alpha 1,
length_penalty=0.0 makes transformers' len**length_penalty 1; early_stopping=False (with
length_penalty 0 the same as "never") stops only when no alive beam can do better, as
t2t does (early_stopping=True stops at `beams` finished hypotheses even when an alive one
scores better). They differ in the rules for finished hypotheses, which no setting of
either changes:
  1. transformers keeps an EOS candidate as finished only when it ranks within the best
     `beams` of the step's 2 * beams candidates; t2t keeps any EOS candidate of the 2 *
     beams (so t2t can return a better-scoring, often shorter, hypothesis);
  2. at the length limit transformers ranks the cut beams with the finished hypotheses;
     t2t returns the best finished hypothesis whenever one exists.
`reference_beam_search` runs the search once over transformers' model and applies both
rule sets: with transformers' rules it must reproduce generate, with t2t's rules t2t's
output; rows where the rules agree must equal generate outright.
  3. A generated pad id: t2t's id 0 is padding, and the targets modality zeroes its
     embedding; transformers embeds it (T5's pad row is the decoder's start embedding,
     not zero). The T5 fixtures shrink the pad row so that pad is never a candidate, as
     in a trained model (Marian's pad row is zero on both sides).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

from t2t.data.encoders.pretrained_vocab import load_pretrained_encoders  # noqa: E402
from t2t.decoding import infer  # noqa: E402
from t2t.decoding import settings as decode_settings  # noqa: E402
from t2t.features import EOS_ID, PAD_ID  # noqa: E402
from t2t.models import checkpoints  # noqa: E402
from t2t.pretrained import import_run, vocab  # noqa: E402
from tests.helpers import hf_fixtures  # noqa: E402
from tests.pretrained.conftest import CHECKPOINTS  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
LOGITS_TOLERANCE = 1e-4
SCORE_TOLERANCE = 1e-4
NEW_TOKENS = 8  # max_new_tokens of every decoding
BEAMS = 4
SENTENCES = 6  # rows of the batch


@dataclass
class Pair:
    """One architecture: transformers' model and tokenizer, t2t's imported model."""

    name: str
    hf_model: Any
    tokenizer: Any
    model: Any  # t2t's transformer, restored from the imported run
    encoders: dict[str, Any]  # the run's "inputs" / "targets" encoders
    checkpoint_ids: np.ndarray  # t2t id i -> checkpoint id


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """torch on one thread: its tiny ops here run ~50x faster than with threads that wait
    for the cores other test processes hold."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def sample() -> list[tuple[str, str]]:
    """SENTENCES short (English, German) messages of catalogs the tokenizers never saw."""
    pairs = hf_fixtures.gettext_pairs("de", hf_fixtures.UNSEEN_CATALOGS)
    short = [(s, t) for s, t in pairs if 15 < len(s) < 40 and len(t) < 45]
    return short[::60][:SENTENCES]


@pytest.fixture(scope="module")
def imported(hf_checkpoint, tmp_path_factory) -> Any:
    """name -> its Pair: the checkpoint imported into a new run, and both models (made on
    first use, once per module)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    made: dict[str, Pair] = {}

    def get(name: str) -> Pair:
        if name in made:
            return made[name]
        folder = hf_checkpoint(name)
        run_dir = str(tmp_path_factory.mktemp("run") / name)
        summary = import_run.import_checkpoint(folder, run_dir)
        with open(f"{run_dir}/run.json", encoding="utf-8") as f:
            run = json.load(f)
        model, _ = import_run.build_model(run["hparams_set"], run["hparams"], summary.vocab_size)
        checkpoints.restore(f"{run_dir}/{import_run.IMPORTED_CHECKPOINT}", model)
        hf_model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
        pretrained = vocab.read_marian_vocab(folder) if name.startswith("marian") else \
            vocab.read_t5_vocab(folder, hf_model.config.vocab_size)
        made[name] = Pair(name, hf_model, AutoTokenizer.from_pretrained(folder), model,
                          load_pretrained_encoders(run_dir), np.asarray(pretrained.checkpoint_ids))
        return made[name]

    return get


@pytest.fixture(scope="module", params=list(CHECKPOINTS))
def pair(request, imported) -> Pair:
    """Every architecture: logits and tokenization (fast)."""
    return imported(request.param)


# Decoding runs eagerly, ~0.1 s a step on each side: two architectures in the quick run
# (Marian with finished hypotheses where the two rules differ; T5 v1.1 with both finished
# and cut ones), the other two with the slow tests.
DECODED = ["marian_swish", "t5_v1_1", pytest.param("marian_relu", marks=pytest.mark.slow),
           pytest.param("t5_v1_0", marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=DECODED)
def decoded_pair(request, imported) -> Pair:
    return imported(request.param)


def padded(rows: list[list[int]]) -> np.ndarray:
    """int32 [B, L]: the rows, 0-padded to the longest."""
    out = np.full([len(rows), max(map(len, rows))], PAD_ID, np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def encode(pair: Pair, feature: str, texts: list[str]) -> np.ndarray:
    """t2t ids [B, L] of `texts` + EOS, as t2t-decoder and the data pipeline make them."""
    return padded([pair.encoders[feature].encode(text) + [EOS_ID] for text in texts])


def generation_config(pair: Pair, beams: int) -> Any:
    """transformers' settings equal to t2t's decoding with `beams` (1: greedy; alpha 0).

    From a fresh GenerationConfig, so none of the extras t2t lacks apply (OPUS-MT's
    generation_config.json sets some): forced_eos_token_id (EOS forced at max_length),
    bad_words_ids (Marian's [[pad]]), no_repeat_ngram_size, min_length /
    min_new_tokens, repetition_penalty, suppress_tokens: all off."""
    from transformers import GenerationConfig

    config = pair.hf_model.config
    return GenerationConfig(
        decoder_start_token_id=config.decoder_start_token_id, eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id, max_new_tokens=NEW_TOKENS, num_beams=beams,
        do_sample=False, length_penalty=0.0, early_stopping=False, forced_eos_token_id=None,
        bad_words_ids=None, no_repeat_ngram_size=0, min_length=0, repetition_penalty=1.0,
        output_scores=beams > 1, return_dict_in_generate=True)


def until_eos(ids: Any, eos: int) -> list[int]:
    """The ids up to and including the first `eos` (all of them when there is none)."""
    out = []
    for token in np.asarray(ids).tolist():
        out.append(int(token))
        if token == eos:
            break
    return out


@dataclass
class Decodes:
    """Both sides' decodings of the sample (checkpoint ids up to EOS, and scores), and
    for beam search the reference's results under each library's rules."""

    hf: list[list[int]]  # generate's output
    hf_scores: np.ndarray | None
    t2t: list[list[int]]
    t2t_scores: np.ndarray
    t2t_texts: list[str]
    reference: BeamReference | None = None
    # beam search with beam_search_rule="transformers" (generate's finishing rules)
    t2t_hf_rule: list[list[int]] | None = None
    t2t_hf_rule_scores: np.ndarray | None = None


@dataclass
class BeamReference:
    """One beam search over transformers' model, with both libraries' rules for
    finished hypotheses: (ids, score) per row for t2t's and for transformers'."""

    t2t: list[list[int]]
    t2t_scores: np.ndarray
    hf: list[list[int]]
    hf_scores: np.ndarray


def next_log_probs(hf_model: Any, encoded: Any, mask: Any, prefixes: list[list[int]]
                   ) -> np.ndarray:
    """float32 [N, V]: transformers' log-probabilities of the token after each prefix
    (equal lengths), without a cache."""
    start = hf_model.config.decoder_start_token_id
    with torch.no_grad():
        logits = hf_model(encoder_outputs=encoded, attention_mask=mask,
                          decoder_input_ids=torch.tensor([[start, *p] for p in prefixes])).logits
    return torch.log_softmax(logits[:, -1].float(), dim=-1).numpy()


def reference_beam_search(hf_model: Any, input_ids: Any, mask: Any, beams: int, length: int,
                          eos: int) -> BeamReference:
    """Beam search written out over transformers' model: every step extends the alive
    beams, keeps the 2 * beams best candidates and continues the best `beams` that did
    not end in EOS (both libraries). Finished hypotheses: t2t keeps every EOS candidate
    of the 2 * beams and returns the best finished one, or the best alive one when none
    finished; transformers keeps an EOS candidate only within the best `beams`, adds
    the best `beams` candidates at the length limit (cut), and stops adding once `beams`
    are finished and no alive beam scores better (early_stopping=False)."""
    from transformers.modeling_outputs import BaseModelOutput

    with torch.no_grad():
        hidden = hf_model.get_encoder()(input_ids=input_ids, attention_mask=mask).last_hidden_state
    encoded = BaseModelOutput(last_hidden_state=hidden.repeat_interleave(beams, 0))
    mask = mask.repeat_interleave(beams, 0)
    rows = len(input_ids)
    alive = [[([], 0.0)] + [([], -1e9)] * (beams - 1) for _ in range(rows)]
    t2t_pool: list[list] = [[] for _ in range(rows)]
    hf_pool: list[list] = [[] for _ in range(rows)]
    hf_done = [False] * rows
    for step in range(length):
        log_probs = next_log_probs(hf_model, encoded, mask, [s for row in alive for s, _ in row])
        log_probs = log_probs.reshape(rows, beams, -1)
        vocab_size = log_probs.shape[-1]
        for r in range(rows):
            scores = np.asarray([score for _, score in alive[r]])[:, None] + log_probs[r]
            best = np.argsort(-scores, axis=None, kind="stable")[: 2 * beams]
            candidates = [(alive[r][j // vocab_size][0] + [int(j % vocab_size)],
                           float(scores.flat[j])) for j in best]
            ended = [c for c in candidates if c[0][-1] == eos]
            t2t_pool[r] = sorted(t2t_pool[r] + ended, key=lambda c: -c[1])[:beams]
            if not hf_done[r]:
                new = [c for c in candidates[:beams] if c[0][-1] == eos or step == length - 1]
                hf_pool[r] = sorted(hf_pool[r] + new, key=lambda c: -c[1])[:beams]
            alive[r] = [c for c in candidates if c[0][-1] != eos][:beams]
            hf_done[r] |= len(hf_pool[r]) == beams and alive[r][0][1] <= hf_pool[r][-1][1]
    t2t = [(pool or row)[0] for pool, row in zip(t2t_pool, alive, strict=True)]
    return BeamReference([ids for ids, _ in t2t], np.asarray([s for _, s in t2t]),
                         [pool[0][0] for pool in hf_pool], np.asarray([p[0][1] for p in hf_pool]))


def decode_both(pair: Pair, sources: list[str], beams: int) -> Decodes:
    inputs = encode(pair, "inputs", sources)
    input_ids, mask = torch.tensor(pair.checkpoint_ids[inputs]), torch.tensor(inputs != PAD_ID)
    with torch.no_grad():
        out = pair.hf_model.generate(input_ids=input_ids, attention_mask=mask,
                                     generation_config=generation_config(pair, beams))
    eos = pair.hf_model.config.eos_token_id
    hf = [until_eos(row[1:], eos) for row in out.sequences.numpy()]  # [0]: the start id
    result = infer.infer(pair.model, {"inputs": tf.constant(inputs)}, decode_length=NEW_TOKENS,
                         beam_size=beams, alpha=0.0)
    ids = result["outputs"].numpy()
    texts = [decode_settings.target_text(row, pair.encoders["targets"], False) for row in ids]
    t2t = [until_eos(pair.checkpoint_ids[row], eos) for row in ids]
    if beams == 1:
        return Decodes(hf, None, t2t, result["scores"].numpy(), texts)
    reference = reference_beam_search(pair.hf_model, input_ids, mask, beams, NEW_TOKENS, eos)
    hf_rule = infer.infer(pair.model, {"inputs": tf.constant(inputs)}, decode_length=NEW_TOKENS,
                          beam_size=beams, alpha=0.0, beam_search_rule="transformers")
    return Decodes(hf, out.sequences_scores.numpy(), t2t, result["scores"].numpy(), texts,
                   reference, [until_eos(pair.checkpoint_ids[row], eos)
                               for row in hf_rule["outputs"].numpy()],
                   hf_rule["scores"].numpy())


@pytest.fixture(scope="module")
def greedy(decoded_pair, sample) -> Decodes:
    return decode_both(decoded_pair, [s for s, _ in sample], beams=1)


@pytest.fixture(scope="module")
def beam(decoded_pair, sample) -> Decodes:
    return decode_both(decoded_pair, [s for s, _ in sample], beams=BEAMS)


def test_tokenization_equals_the_tokenizer(pair, sample):
    """The run's encoders give the tokenizer's own ids (mapped to checkpoint ids)."""
    sources, targets = [s for s, _ in sample], [t for _, t in sample]
    inputs, labels = encode(pair, "inputs", sources), encode(pair, "targets", targets)
    theirs = pair.tokenizer(sources, text_target=targets)
    for row in range(len(sample)):
        assert until_eos(pair.checkpoint_ids[inputs[row]], pair.tokenizer.eos_token_id) == \
            theirs["input_ids"][row], sources[row]
        assert until_eos(pair.checkpoint_ids[labels[row]], pair.tokenizer.eos_token_id) == \
            theirs["labels"][row], targets[row]


def test_logits_equal_transformers(pair, sample):
    """Teacher forcing on a padded batch: t2t's logits equal transformers' (in t2t's id
    order) at every target position within 1e-4."""
    inputs = encode(pair, "inputs", [s for s, _ in sample])
    targets = encode(pair, "targets", [t for _, t in sample])
    logits, _ = pair.model({"inputs": tf.constant(inputs), "targets": tf.constant(targets)},
                           training=False)
    logits = np.reshape(logits.numpy(), targets.shape + (-1,))
    config = pair.hf_model.config
    shifted = np.concatenate([np.full([len(targets), 1], config.decoder_start_token_id),
                              pair.checkpoint_ids[targets][:, :-1]], axis=1)
    with torch.no_grad():
        theirs = pair.hf_model(
            input_ids=torch.tensor(pair.checkpoint_ids[inputs]),
            attention_mask=torch.tensor(inputs != PAD_ID),
            decoder_input_ids=torch.tensor(shifted)).logits.numpy()[..., pair.checkpoint_ids]
    real = targets != PAD_ID
    difference = np.abs(logits - theirs)[real].max()
    print(f"{pair.name}: max |logits difference| {difference:.2e} over {real.sum()} positions")
    assert difference < LOGITS_TOLERANCE
    assert np.abs(theirs[real]).max() > 100 * LOGITS_TOLERANCE  # not trivially equal


def test_greedy_equals_generate(decoded_pair, greedy):
    """t2t's greedy decoding gives generate(num_beams=1)'s tokens for every row."""
    pair = decoded_pair
    eos = pair.hf_model.config.eos_token_id
    print(f"{pair.name} greedy: {sum(a == b for a, b in zip(greedy.hf, greedy.t2t, strict=True))}/"
          f"{len(greedy.t2t)} rows equal; lengths {[len(x) for x in greedy.hf]}, "
          f"{sum(x[-1] == eos for x in greedy.hf)} ended by EOS")
    assert greedy.t2t == greedy.hf


def test_beam_search_equals_generate(decoded_pair, beam):
    """t2t's beam search (4 beams, alpha 0) equals generate(num_beams=4,
    length_penalty=0.0, early_stopping=False) up to the rules for finished hypotheses:
    the reference search with transformers' rules reproduces generate (ids and scores),
    the same search with t2t's rules reproduces t2t, and rows where the two rules agree
    are equal outright."""
    pair = decoded_pair
    reference, eos = beam.reference, pair.hf_model.config.eos_token_id
    assert reference.hf == beam.hf
    np.testing.assert_allclose(reference.hf_scores, beam.hf_scores, atol=SCORE_TOLERANCE)
    assert beam.t2t == reference.t2t
    np.testing.assert_allclose(beam.t2t_scores, reference.t2t_scores, atol=SCORE_TOLERANCE)
    same = [r for r in range(len(beam.hf)) if reference.t2t[r] == reference.hf[r]]
    assert [beam.t2t[r] for r in same] == [beam.hf[r] for r in same]
    print(f"{pair.name} beam: {len(same)}/{len(beam.hf)} rows equal to generate's; the others "
          f"differ by the rules for finished hypotheses (t2t's scores "
          f"{np.round(beam.t2t_scores, 2).tolist()}, generate's "
          f"{np.round(beam.hf_scores, 2).tolist()}); lengths {[len(x) for x in beam.t2t]}, "
          f"{sum(x[-1] == eos for x in beam.t2t)} ended by EOS")


def test_beam_search_with_transformers_rule_equals_generate(decoded_pair, beam):
    """--decode_hparams=beam_search_rule=transformers,alpha=0: every row and score equal
    to generate(num_beams=4, length_penalty=0.0, early_stopping=False)'s."""
    assert beam.t2t_hf_rule == beam.hf
    np.testing.assert_allclose(beam.t2t_hf_rule_scores, beam.hf_scores, atol=SCORE_TOLERANCE)


@pytest.mark.parametrize("mode", ["greedy", "beam"])
def test_decoded_text_equals_tokenizer_decode(decoded_pair, mode, request):
    """t2t's output text (the run's targets encoder, as t2t-decoder makes it) equals
    tokenizer.decode(the same ids, skip_special_tokens=True): generate's for greedy, the
    reference's for beam search (generate's where the rules agree)."""
    decodes = request.getfixturevalue(mode)
    ids = decodes.hf if decodes.reference is None else decodes.reference.t2t
    theirs = [decoded_pair.tokenizer.decode(row, skip_special_tokens=True) for row in ids]
    assert decodes.t2t_texts == theirs
