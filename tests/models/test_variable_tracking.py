"""Every registered model's variables are all in its checkpoints, under stable names."""

import pytest
import tensorflow as tf

from t2t import registry
from t2t.hparams.basic import create_hparams
from t2t.models import variable_tracking
from t2t.problems.problem import ProblemHParams
from t2t.trainer.trainer import dummy_features

SEQ2SEQ = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 6, "targets": 6})
IMAGES = ProblemHParams(modality={"inputs": "image", "targets": "class_label"},
                        vocab_size={"inputs": 256, "targets": 3}, batch_size_means_tokens=False,
                        image_shape=[8, 8, 1])
CASES = [
    ("transformer", "transformer_test", SEQ2SEQ, ""),
    ("lstm_seq2seq", "lstm_seq2seq", SEQ2SEQ, "hidden_size=8"),
    ("lstm_seq2seq_attention", "lstm_attention", SEQ2SEQ, "hidden_size=8,attention_layer_size=8"),
    ("resnet", "resnet_tiny_cpu", IMAGES, ""),
    ("shake_shake", "shake_shake_quick", IMAGES, "num_hidden_layers=8,hidden_size=16"),
    ("basic_fc_relu", "basic_fc_small", IMAGES, "hidden_size=8"),
]


def _build(model_name, hparams_set, php, overrides):
    model = registry.model(model_name)(create_hparams(hparams_set, overrides), "train", php)
    model.build_for(dummy_features(php))
    return model


@pytest.mark.parametrize("model_name,hparams_set,php,overrides", CASES)
def test_checkpoint_holds_every_variable_by_attribute_path(model_name, hparams_set, php, overrides, tmp_path):
    model = _build(model_name, hparams_set, php, overrides)
    names = variable_tracking.named_variables(model)
    assert len(names) == len(model.variables)
    assert not [n for n in names if n.startswith("unnamed")], sorted(names)
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    saved = [k for k in tf.train.load_checkpoint(path).get_variable_to_shape_map() if k.startswith("model/")]
    assert len(saved) == len(model.variables)
    # A second instance (other Keras auto-names) restores every value.
    other = _build(model_name, hparams_set, php, overrides)
    tf.train.Checkpoint(model=other).read(path).assert_existing_objects_matched()
    for a, b in zip(model.variables, other.variables, strict=True):
        tf.debugging.assert_equal(a.value, b.value)


def test_names_follow_attributes_lists_and_dicts():
    model = _build("transformer", "transformer_test", SEQ2SEQ, "")
    names = variable_tracking.named_variables(model)
    assert "encoder.stack_layers.0.self_attention.inner.q._kernel" in names
    # The shared symbol modality is reached first through "inputs" (sorted order).
    assert "feature_modalities.inputs.embedding" in names
