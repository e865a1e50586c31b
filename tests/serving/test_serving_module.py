"""What the serving module refuses to export, and the variables it saves."""

import pytest
import tensorflow as tf

from t2t.features import ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.models import t2t_model
from t2t.serving import serving_module


def test_unsized_images_and_real_inputs_are_refused():
    # Language models are exported with their own signatures (tests/serving/test_lm_export.py).
    images = ProblemHParams(modality={"inputs": "image", "targets": "class_label"},
                            vocab_size={"inputs": 256, "targets": 3}, image_shape=[None, None, 3])
    with pytest.raises(serving_module.ExportError, match="images of varying size"):
        serving_module._model_input_spec("images", images)
    real = ProblemHParams(modality={"inputs": "real", "targets": "symbol"},
                          vocab_size={"inputs": 4, "targets": 5})
    with pytest.raises(serving_module.ExportError, match="cannot serve real inputs"):
        serving_module._model_input_spec("reals", real)


def test_underlying_variables_are_the_models_tf_variables_once_each():
    php = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 5, "targets": 5})
    model = t2t_model.create_model("transformer", create_hparams("transformer_test"), "infer", php)
    model.build_weights()
    found = serving_module.underlying_variables(model)
    assert all(isinstance(v, tf.Variable) for v in found)
    assert len(found) == len({id(v) for v in found}) == len(model.variables)
