"""Every registered model's variables are all in its checkpoints, under stable names."""

import keras
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.problem import ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints, variable_names
from t2t.models.t2t_model import example_features

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
    model.build_for(example_features(php))
    return model


@pytest.mark.parametrize("model_name,hparams_set,php,overrides", CASES)
def test_checkpoint_holds_every_variable_by_attribute_path(model_name, hparams_set, php, overrides, tmp_path):
    model = _build(model_name, hparams_set, php, overrides)
    names = variable_names.named_variables(model)
    assert len(names) == len(model.variables)
    assert not [n for n in names if n.startswith("unnamed")], sorted(names)
    path = tf.train.Checkpoint(model=checkpoints.model_trackable(model)).save(str(tmp_path / "ckpt"))
    saved = [k for k in tf.train.load_checkpoint(path).get_variable_to_shape_map() if k.startswith("model/")]
    assert len(saved) == len(model.variables)
    # A second instance (other Keras auto-names) restores every value.
    other = _build(model_name, hparams_set, php, overrides)
    tf.train.Checkpoint(model=checkpoints.model_trackable(other)).read(path).assert_existing_objects_matched()
    for a, b in zip(model.variables, other.variables, strict=True):
        tf.debugging.assert_equal(a.value, b.value)


def test_names_follow_attributes_lists_and_dicts():
    model = _build("transformer", "transformer_test", SEQ2SEQ, "")
    names = variable_names.named_variables(model)
    assert "encoder.stack_layers.0.self_attention.inner.q.kernel" in names
    # The shared symbol modality is reached first through "inputs" (sorted order).
    assert "feature_modalities.inputs.embedding" in names


class _Wrapper(keras.layers.Layer):
    """A user's layer: public attributes are its names; Keras layers inside are leaves."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(3, name="whatever_keras_calls_it")
        self.lstms = [keras.layers.LSTM(2)]
        self.drop = keras.layers.Dropout(0.5)
        self.seeds = keras.random.SeedGenerator(1)
        self._hidden = keras.layers.Dense(2)  # private, but a layer: named
        self._kept = [keras.layers.Dense(2)]  # a private container: bookkeeping, not named
        self.scale = self.add_weight(name="s", shape=())

    def call(self, x):
        return self.drop(self.dense(x)) * self.scale


def test_keras_layers_are_leaves_named_by_their_weight_names():
    layer = _Wrapper()
    layer.dense.build((None, 4))
    layer.lstms[0].build((None, 5, 4))
    layer._hidden.build((None, 4))
    layer._kept[0].build((None, 4))
    names = variable_names.named_variables(layer)
    assert {n for n in names if not n.startswith("unnamed.")} == {
        "dense.kernel", "dense.bias", "lstms.0.kernel", "lstms.0.recurrent_kernel",
        "lstms.0.bias", "lstms.0.seed_generator_state", "drop.seed_generator_state",
        "seeds.state", "scale", "_hidden.kernel", "_hidden.bias"}
    unnamed = [v for n, v in names.items() if n.startswith("unnamed.")]
    assert {id(v) for v in unnamed} == {id(v) for v in layer._kept[0].variables}
    legacy = variable_names.legacy_names(layer)
    assert legacy["dense.kernel"][:2] == ("dense.kernel", "dense._kernel")
    assert "lstms.0.cell.kernel" in legacy["lstms.0.kernel"]
    assert "drop.seed_generator.state" in legacy["drop.seed_generator_state"]
    assert "lstms.0.cell.seed_generator.state" in legacy["lstms.0.seed_generator_state"]


def test_a_keras_layer_with_two_weights_of_one_name_is_refused():
    class Twice(keras.layers.Dense):  # defined here, not in Keras: walked, so fine
        pass

    pair = keras.layers.Bidirectional(keras.layers.LSTM(2))
    pair.build((None, 3, 2))
    holder = keras.layers.Layer()
    holder.pair = pair
    with pytest.raises(variable_names.VariableNameError, match="several variables named alike"):
        variable_names.named_variables(holder)
    assert not variable_names.is_keras_layer(Twice(2)) and variable_names.is_keras_layer(pair)
