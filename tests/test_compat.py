"""Tests of t2t.compat: Tensor2Tensor's import paths answered by t2t's modules."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import t2t
from t2t import compat, registry


def test_tensor2tensor_paths_are_t2t_modules():
    from tensor2tensor.data_generators import generator_utils, problem, text_encoder, text_problems
    from tensor2tensor.utils import metrics
    from tensor2tensor.utils import registry as t2t_registry

    from t2t.data import problem as t2t_problem
    from t2t.data.bases import text_problems as t2t_text_problems

    assert problem.Problem is t2t_problem.Problem
    assert problem.SpaceID.EN_TOK == 3 and problem.DatasetSplit.EVAL == "dev"
    assert text_problems.Text2TextProblem is t2t_text_problems.Text2TextProblem
    assert text_problems.VocabType.SUBWORD == "subwords"
    assert text_problems.VocabType.CHARACTER == "byte"  # T2T's byte-level encoder
    assert text_problems.VocabType.TOKEN == "tokens"
    assert text_encoder.SubwordTextEncoder.__module__ == "t2t.data.encoders.subword_encoder"
    assert callable(generator_utils.maybe_download) and callable(generator_utils.to_example)
    assert t2t_registry.register_problem is registry.register_problem
    assert (metrics.Metrics.ACC, metrics.Metrics.APPROX_BLEU, metrics.Metrics.RMSE) == (
        "accuracy", "approx_bleu_score", "rmse")


def test_t2t_shaped_paths_under_t2t():
    from t2t.data_generators import problem, text_problems  # noqa: F401

    from t2t.utils import metrics
    from t2t.utils import registry as utils_registry

    assert problem.Problem is importlib.import_module("t2t.data.problem").Problem
    assert utils_registry.register_hparams is registry.register_hparams
    assert metrics.Metrics.ROUGE_2_F == "rouge_2_fscore"


def test_problems_available_lists_registered_problems():
    from tensor2tensor import problems

    names = problems.available()
    assert names == sorted(names) and "algorithmic_reverse_binary40" in names
    assert names == t2t.problems.available()


def test_hparams_sets_the_way_t2t_users_wrote_them():
    from tensor2tensor.layers import common_hparams
    from tensor2tensor.models import basic, transformer

    hparams = transformer.transformer_base()
    assert (hparams.hidden_size, hparams.num_heads) == (512, 8)
    hparams.add_hparam("my_extra", 3)
    hparams.set_hparam("my_extra", 4)
    hparams.set_hparam("hidden_size", 256)
    assert (hparams.my_extra, hparams.hidden_size) == (4, 256)
    assert common_hparams.basic_params1().batch_size == 4096
    assert basic.basic_fc_small().hidden_size == 256
    assert transformer.Transformer.__name__ == "Transformer"  # the model, in the same module
    assert transformer.transformer_librispeech_v1().hidden_size > 0  # T2T kept it there too


def test_modalities_and_mode_keys():
    import tensorflow as tf
    import tensorflow.compat.v1 as tf_v1
    from tensor2tensor.layers import modalities

    assert modalities.ModalityType.SYMBOL == "symbol"
    assert modalities.ModalityType.REAL_L2_LOSS == "real_l2"
    assert "video" in modalities.ModalityType.get_choices()

    @modalities.is_pointwise
    def bottom(x):
        return x

    assert bottom.pointwise is True
    for module in (tf, tf_v1):
        keys = module.estimator.ModeKeys
        assert (keys.TRAIN, keys.EVAL, keys.PREDICT) == ("train", "eval", "infer")
    with pytest.raises(AttributeError, match="no Estimators"):
        tf.estimator.Estimator  # noqa: B018


def test_missing_module_says_what_to_use():
    with pytest.raises(ImportError, match="t2t-trainer"):
        importlib.import_module("tensor2tensor.utils.trainer_lib")
    with pytest.raises(ImportError, match="console scripts"):
        importlib.import_module("tensor2tensor.bin.t2t_trainer")
    with pytest.raises(ImportError, match="docs/how-to/coming-from-t2t.md"):
        importlib.import_module("tensor2tensor.utils.no_such_module")


def test_missing_name_says_so_in_both_import_styles():
    from tensor2tensor.layers import common_layers

    with pytest.raises(AttributeError, match=r"common_layers\.shape_list is not in t2t.*T2TModel"):
        common_layers.shape_list  # noqa: B018
    with pytest.raises(ImportError, match=r"shape_list.*stand-in for t2t.layers.common.*"
                                          r"docs/how-to/coming-from-t2t.md"):
        exec("from tensor2tensor.layers.common_layers import shape_list", {})
    # An AttributeError: probing works.
    assert not hasattr(common_layers, "shape_list") and not hasattr(common_layers, "__wrapped__")
    assert getattr(common_layers, "shape_list", None) is None


def test_an_installed_tensor2tensor_wins(tmp_path):
    """The hook is the last finder: a real tensor2tensor on sys.path is imported."""
    package = tmp_path / "tensor2tensor"
    (package / "utils").mkdir(parents=True)
    (package / "__init__.py").write_text("REAL = True\n")
    (package / "utils" / "__init__.py").write_text("")
    (package / "utils" / "registry.py").write_text("REAL_REGISTRY = True\n")
    code = ("import t2t\nimport tensor2tensor\nfrom tensor2tensor.utils import registry\n"
            "print(tensor2tensor.REAL, registry.REAL_REGISTRY)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(tmp_path)})
    assert out.stdout.strip() == "True True"


def test_enable_is_idempotent_and_disable_removes_the_hook():
    compat.enable()
    compat.enable()
    assert sum(f is compat._FINDER for f in sys.meta_path) == 1
    compat.disable()
    try:
        assert compat._FINDER not in sys.meta_path
        sys.modules.pop("tensor2tensor.utils.hparam", None)
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("tensor2tensor.utils.hparam")
    finally:
        compat.enable()
    assert importlib.import_module("tensor2tensor.utils.hparam").HParams.__name__ == "HParams"
