"""Language-model decoding: prompts forced through the step loop, per-row limits,
stateless per-row sampling (t2t.decoding.prompting, infer with "prompt")."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t.decoding import infer, prompting
from t2t.features import EOS_ID, ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.models import t2t_model

VOCAB = 12
LM = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": VOCAB})


@pytest.fixture(scope="module")
def lm():
    keras.utils.set_random_seed(5)  # Keras initializers ignore tf.random.set_seed
    model = t2t_model.create_model("transformer", create_hparams("transformer_test"), "infer", LM)
    model.build_weights()
    return model


def _no_eos_greedy_by_hand(model, prompt: list[int], steps: int) -> list[int]:
    """Greedy continuation by re-running the model on the growing sequence."""
    ids = list(prompt)
    for _ in range(steps):
        logits, _ = model({"targets": tf.constant([ids + [0]])}, training=False)
        ids.append(int(np.argmax(logits[0, len(ids)].numpy())))
        if ids[-1] == EOS_ID:
            break
    return ids[len(prompt):]


def _trim(row) -> list[int]:
    """The continuation up to its EOS: an untrained model may emit id 0 as a token."""
    row = [int(i) for i in np.asarray(row)]
    return row[: row.index(EOS_ID) + 1] if EOS_ID in row else row


def test_greedy_continuation_matches_the_model_and_the_cache(lm):
    prompts = tf.constant([[3, 4, 5, 6], [7, 8, 0, 0], [0, 0, 0, 0]])
    cached = infer.infer(lm, {"prompt": prompts}, decode_length=6)
    uncached = infer.infer(lm, {"prompt": prompts}, decode_length=6, use_cache=False)
    np.testing.assert_array_equal(cached["outputs"].numpy(), uncached["outputs"].numpy())
    np.testing.assert_allclose(cached["scores"].numpy(), uncached["scores"].numpy(), atol=1e-4)
    assert cached["outputs"].shape == (3, 6)
    for row, prompt in zip(cached["outputs"].numpy(), ([3, 4, 5, 6], [7, 8], []), strict=True):
        assert _trim(row) == _no_eos_greedy_by_hand(lm, prompt, 6)


def test_each_row_gets_at_most_max_new_tokens_and_scores_exclude_the_prompt(lm):
    prompts = tf.constant([[3, 4, 5, 6, 7, 8, 9, 10], [3, 0, 0, 0, 0, 0, 0, 0]])
    result = infer.infer(lm, {"prompt": prompts}, decode_length=3)
    outputs = result["outputs"].numpy()
    assert outputs.shape == (2, 3)
    alone = infer.infer(lm, {"prompt": prompts[1:, :1]}, decode_length=3)
    np.testing.assert_array_equal(outputs[1], alone["outputs"].numpy()[0])
    np.testing.assert_allclose(result["scores"].numpy()[1], alone["scores"].numpy()[0], atol=1e-5)
    assert np.all(result["scores"].numpy() <= 0)


def test_seeded_samples_repeat_and_do_not_depend_on_the_batch(lm):
    prompts = tf.constant([[3, 4, 5], [6, 0, 0]])

    def sample(p, seed):
        return infer.infer(lm, {"prompt": p}, decode_length=8, temperature=1.0, seed=seed,
                           num_samples=4)["outputs"].numpy()

    first, again, other = sample(prompts, 7), sample(prompts, 7), sample(prompts, 8)
    assert first.shape == (2, 4, 8)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    np.testing.assert_array_equal(first[1], sample(prompts[1:, :1], 7)[0])
    assert len({tuple(s) for s in first[0]}) > 1  # the 4 samples differ


def test_beam_search_continues_the_prompt(lm):
    prompts = tf.constant([[3, 4, 5], [6, 0, 0]])
    beams = infer.infer(lm, {"prompt": prompts}, decode_length=5, beam_size=3, top_beams=3,
                        alpha=0.0)
    assert beams["outputs"].shape == (2, 3, 5)
    greedy = infer.infer(lm, {"prompt": prompts}, decode_length=5)
    # The best beam is at least as likely as the greedy continuation.
    assert np.all(beams["scores"].numpy()[:, 0] >= greedy["scores"].numpy() - 1e-4)


def test_continuation_left_aligns_after_each_prompt():
    ids = tf.constant([[5, 6, 7, 8, 1], [9, 2, 3, 0, 0]])
    out = prompting.continuation(ids, tf.constant([2, 1]), 4).numpy()
    assert out.tolist() == [[7, 8, 1, 0], [2, 3, 0, 0]]


def test_beams_of_a_prompt_do_not_depend_on_the_other_prompts_of_its_batch(lm):
    alone = infer.infer(lm, {"prompt": tf.constant([[3, 0, 0]])[:, :1]}, decode_length=4,
                        beam_size=4, top_beams=4, alpha=0.6)
    batched = infer.infer(lm, {"prompt": tf.constant([[3, 0, 0, 0, 0, 0], [3, 4, 5, 6, 7, 8]])},
                          decode_length=4, beam_size=4, top_beams=4, alpha=0.6)
    np.testing.assert_array_equal(alone["outputs"].numpy()[0], batched["outputs"].numpy()[0])
    np.testing.assert_allclose(alone["scores"].numpy()[0], batched["scores"].numpy()[0], atol=1e-5)


def test_a_top_p_tensor_of_one_keeps_every_token():
    from t2t.decoding import sampling

    logits = tf.constant([[0.0, -30.0, -60.0, 5.0]])
    kept = sampling.filter_logits(logits, top_p=tf.constant(1.0)).numpy()
    np.testing.assert_array_equal(kept, logits.numpy())
