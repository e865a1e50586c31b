"""The typed hparams views (t2t.hparams.views): the check, every registered set with its
model, and an ast scan that keeps each view equal to the keys its module reads."""

from __future__ import annotations

import ast
import functools
import time
from pathlib import Path

import pytest

from t2t import registry
from t2t.features import ProblemHParams
from t2t.hparams import views
from t2t.hparams.basic import create_hparams
from t2t.hparams.hparams import HParams, HParamsError

REPO = Path(__file__).resolve().parents[2]

# The module that reads each view's own keys (its "home"); a module that reads hparams
# and is not listed fails test_every_module_that_reads_hparams_has_views.
MODULE_VIEWS: dict[str, tuple[type, ...]] = {
    "t2t/layers/common.py": (views.InitializerHParams, views.NormHParams),
    "t2t/layers/local_attention.py": (views.LocalAttentionHParams,),
    "t2t/layers/audio.py": (views.AudioFeatureHParams, views.SpecAugmentHParams),
    "t2t/layers/modalities.py": (views.ModalityHParams, views.SymbolModalityHParams,
                                 views.DenseModalityHParams, views.AudioModalityHParams),
    "t2t/models/t2t_model.py": (views.ModelHParams,),
    "t2t/models/basic.py": (views.BasicFcReluHParams,),
    "t2t/models/bytenet.py": (views.ByteNetHParams,),
    "t2t/models/neural_gpu.py": (views.NeuralGPUHParams,),
    "t2t/models/xception.py": (views.XceptionHParams,),
    "t2t/models/slicenet.py": (views.SliceNetHParams,),
    "t2t/models/shake_shake.py": (views.ShakeShakeHParams,),
    "t2t/models/resnet.py": (views.ResnetHParams,),
    "t2t/models/revnet.py": (views.RevNetHParams,),
    "t2t/models/lstm.py": (views.LSTMHParams, views.LSTMAttentionHParams),
    "t2t/models/transformer.py": (views.SublayerHParams, views.TransformerLayerHParams,
                                  views.TransformerHParams),
    "t2t/models/image_encoder.py": (views.ImageEncoderHParams,),
    "t2t/models/image_transformer.py": (views.ImagetransformerHParams,),
    "t2t/models/research/universal_transformer.py": (views.UniversalTransformerHParams,),
    "t2t/models/research/transformer_moe.py": (views.TransformerMoeHParams,),
}
# Calls that pass hparams to a reader whose view the caller's does not include, and why.
CONDITIONAL_CALLS = {
    ("image_encoder", "ImageEncoder"):
        "image inputs only; check_image_encoder_hparams names what a set lacks",
}
RECEIVERS = {"hparams", "_hparams", "hp", "model_hparams"}
BAG_METHODS = {"get", "copy", "values", "parse", "set_hparam", "add_hparam", "del_hparam",
               "override_from_dict", "to_json", "diff"}


def _fields(*view_types: type) -> set[str]:
    return set().union(*(views.fields(v) for v in view_types))


# ------------------------------------------------------------------ the check
def test_check_names_each_missing_key_with_the_sets_that_define_it():
    hparams = create_hparams("lstm_seq2seq")  # no attention keys
    with pytest.raises(HParamsError) as info:
        views.check(hparams, views.LSTMAttentionHParams, model="lstm_seq2seq_attention")
    message = str(info.value)
    assert "\n" not in message
    for key in ("num_heads", "attention_mechanism", "attention_layer_size", "output_attention"):
        assert f"missing {key!r} (sets that have it: lstm_" in message, message
    assert "Model 'lstm_seq2seq_attention'" in message and "hidden_size" not in message
    with pytest.raises(HParamsError, match="^This model cannot use these hparams"):
        views.check(hparams, views.LSTMAttentionHParams)
    views.check(create_hparams("lstm_attention"), views.LSTMAttentionHParams)


def test_check_names_each_value_of_the_wrong_type():
    hparams = create_hparams("resnet_tiny_cpu")
    hparams.del_hparam("is_cifar")
    hparams.add_hparam("is_cifar", "yes")
    hparams.del_hparam("layer_sizes")
    hparams.add_hparam("layer_sizes", [1, 2.5])
    with pytest.raises(HParamsError) as info:
        views.check(hparams, views.ResnetHParams, model="resnet")
    message = str(info.value)
    assert "'is_cifar' is str 'yes', not bool" in message
    assert "'layer_sizes' is list [1, 2.5], not list[int]" in message
    assert "missing" not in message


def test_a_conditional_key_is_optional_but_typed_when_defined():
    hparams = create_hparams("transformer_test")
    views.check(hparams, views.TransformerHParams, views.SymbolModalityHParams)
    for key in ("max_relative_position", "self_attention_type", "ctc_loss_weight"):
        if key in hparams:
            hparams.del_hparam(key)
    views.check(hparams, views.TransformerHParams)  # none of them required
    hparams.add_hparam("max_relative_position", "far")
    with pytest.raises(HParamsError, match="'max_relative_position' is str 'far', not int"):
        views.check(hparams, views.TransformerHParams)


@pytest.mark.parametrize("value,hint,expected", [
    (1, int, True), (True, int, False), (1, float, True), (1.5, int, False),
    (False, bool, True), (None, str | None, True), ("a", str | None, True),
    (3, str | None, False), ([1, 2], list[int], True), ([1, "2"], list[int], False),
    ((1,), list[int], False), ([True], list[bool], True),
])
def test_matches_is_the_plain_value_type_test(value, hint, expected):
    assert views.matches(value, hint) is expected


def test_every_view_key_has_a_plain_type():
    for view_types in MODULE_VIEWS.values():
        for view in view_types:
            for field in views.fields(view).values():
                samples = [0, 0.5, True, "s", None, [0], [True], ["s"]]
                assert any(views.matches(s, field.type) for s in samples), (view, field)
                assert field.read_when is None or field.read_when.strip()


# ------------------------------------------------------ every set with its model
SEQ2SEQ = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 6, "targets": 6})
CLASSES = ProblemHParams(modality={"inputs": "image", "targets": "class_label"},
                         vocab_size={"inputs": 256, "targets": 3}, batch_size_means_tokens=False,
                         image_shape=[32, 32, 3])
IMAGE_TARGETS = ProblemHParams(modality={"inputs": "class_label", "targets": "image"},
                               vocab_size={"inputs": 10, "targets": 256},
                               batch_size_means_tokens=False, image_shape=[8, 8, 3])
CAPTIONS = ProblemHParams(modality={"inputs": "image", "targets": "symbol"},
                          vocab_size={"inputs": 256, "targets": 6}, image_shape=[32, 32, 3])
SPEECH = ProblemHParams(modality={"inputs": "audio", "targets": "symbol"},
                        vocab_size={"inputs": 256, "targets": 6}, audio_sample_rate=16000)
# The registering module of a set -> (its models, the problem they are built for).
FAMILIES = {
    "basic": (["basic_fc_relu"], CLASSES),
    "basic_models": (["basic_fc_relu"], CLASSES),
    "bytenet": (["bytenet"], SEQ2SEQ),
    "neural_gpu": (["neural_gpu"], SEQ2SEQ),
    "slicenet": (["slicenet"], SEQ2SEQ),
    "xception": (["xception"], CLASSES),
    "resnet": (["resnet"], CLASSES),
    "revnet": (["revnet"], CLASSES),
    "shake_shake": (["shake_shake"], CLASSES),
    "image_transformer": (["imagetransformer", "image_transformer"], IMAGE_TARGETS),
    "transformer": (["transformer"], SEQ2SEQ),
    "transformer_relative": (["transformer"], SEQ2SEQ),
    "pretrained": (["transformer"], SEQ2SEQ),
    "image_text": (["transformer"], CAPTIONS),
    "speech": (["transformer"], SPEECH),
    "transformer_moe": (["transformer_moe"], SEQ2SEQ),
    "universal_transformer": (["universal_transformer", "universal_transformer_encoder"], SEQ2SEQ),
}
LSTM_MODELS = ["lstm_seq2seq", "lstm_seq2seq_bidirectional_encoder"]
LANGUAGE_MODEL = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": 6})
# Sets that build only with an override their module documents.
OVERRIDES = {"transformer_moe_8k": "default_ff=sepm", "transformer_moe_12k": "default_ff=sepm"}


def models_of(set_name: str) -> tuple[list[str], ProblemHParams]:
    """The registered models `set_name` is for, and a problem to build them for."""
    family = registry.hparams(set_name).__module__.rsplit(".", 1)[-1]
    if family == "lstm":
        attention = [f"lstm_seq2seq_attention{s}" for s in ("", "_bidirectional_encoder")]
        return (LSTM_MODELS if set_name == "lstm_seq2seq" else attention), SEQ2SEQ
    if set_name == "transformer_teeny":  # registered beside the universal transformer's sets
        return ["transformer"], SEQ2SEQ
    if set_name.startswith("transformer_moe") and set_name != "transformer_moe_tiny":
        return ["transformer_moe"], LANGUAGE_MODEL  # decoder-only layer_types
    return FAMILIES[family]


def _pairs() -> list[tuple[str, str, ProblemHParams]]:
    return [(s, m, php) for s in registry.list_hparams() for m in models_of(s)[0]
            for php in [models_of(s)[1]]]


def test_every_registered_set_satisfies_its_models_views():
    from t2t.models import t2t_model

    pairs = _pairs()
    assert len({s for s, _, _ in pairs}) >= 91
    builtin = {m for m in registry.list_models() if registry.model(m).__module__.startswith("t2t.")}
    assert builtin <= {m for _, m, _ in pairs}  # (other tests register models of their own)
    for set_name, model_name, php in pairs:
        cls = registry.model(model_name)
        assert cls.HPARAMS_VIEW is not views.ModelHParams, model_name
        views.check(create_hparams(set_name), *t2t_model.hparams_views(cls, php),
                    model=model_name)


@pytest.mark.slow
def test_every_registered_set_builds_its_models():
    from t2t.models import t2t_model

    start = time.perf_counter()
    for set_name, model_name, php in _pairs():
        hparams = create_hparams(set_name, OVERRIDES.get(set_name, ""))
        t2t_model.create_model(model_name, hparams, "train", php)
    print(f"{len(_pairs())} models built in {time.perf_counter() - start:.1f} s")


def test_create_model_refuses_a_set_without_a_key_before_building():
    from t2t.models import t2t_model

    hparams = create_hparams("transformer_test")
    hparams.del_hparam("pos")
    hparams.del_hparam("num_heads")
    with pytest.raises(HParamsError, match=r"Model 'transformer' cannot use these hparams "
                       r"\(TransformerHParams, SymbolModalityHParams\): missing 'num_heads' "
                       r"\(sets that have it: transformer_.*missing 'pos'"):
        t2t_model.create_model("transformer", hparams, "train", SEQ2SEQ)
    model = t2t_model.create_model("transformer", create_hparams("transformer_test"), "train",
                                   SEQ2SEQ)
    assert model.HPARAMS_VIEW is views.TransformerHParams
    speech = create_hparams("transformer_test")
    with pytest.raises(HParamsError, match="missing 'audio_frontend_layers' .*transformer_"):
        t2t_model.create_model("transformer", speech, "train", SPEECH)


# ------------------------------------------------------------------ ast scan
@functools.cache
def _tree(path: str) -> ast.Module:
    return ast.parse((REPO / path).read_text(encoding="utf-8"))


def _receiver(node: ast.expr) -> bool:
    """`hparams`, `hp`, `self.hparams`, `x._hparams`: an hparams bag."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name in RECEIVERS


def reads(tree: ast.AST) -> set[str]:
    """Keys read from an hparams receiver: `.KEY`, `.get("KEY")`, getattr(hp, "KEY"),
    `"KEY" in hp`."""
    found = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
                and _receiver(node.value) and node.attr not in BAG_METHODS):
            found.add(node.attr)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and _receiver(func.value):
                found.add(node.args[0].value)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                and _receiver(node.args[0]) and isinstance(node.args[1], ast.Constant)):
            found.add(node.args[1].value)
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
                and isinstance(node.ops[0], (ast.In, ast.NotIn)) and _receiver(node.comparators[0])):
            found.add(node.left.value)
    return found


def named(tree: ast.AST) -> set[str]:
    """Every key `tree` reads or names in a string (getattr(hp, name) over a tuple)."""
    strings = {n.value for n in ast.walk(tree)
               if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return reads(tree) | strings


def _scanned_modules() -> list[str]:
    return sorted(p.relative_to(REPO).as_posix() for folder in ("t2t/models", "t2t/layers")
                  for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_that_reads_hparams_has_views():
    unlisted = [path for path in _scanned_modules() if reads(_tree(path)) - {None}
                and path not in MODULE_VIEWS]
    assert not unlisted, f"add views for these modules to t2t.hparams.views: {unlisted}"


def test_each_view_lists_every_key_its_module_reads():
    unlisted = {path: sorted(reads(_tree(path)) - _fields(*view_types))
                for path, view_types in MODULE_VIEWS.items()}
    unlisted = {path: keys for path, keys in unlisted.items() if keys}
    assert not unlisted, f"declare these keys in the module's view (t2t.hparams.views): {unlisted}"


def test_each_view_declares_only_keys_its_module_reads():
    stale = {view.__name__: sorted(views.own_keys(view) - named(_tree(path)))
             for path, view_types in MODULE_VIEWS.items() for view in view_types}
    stale = {name: keys for name, keys in stale.items() if keys}
    assert not stale, f"keys a view declares that its module never reads: {stale}"
    homed = {view for view_types in MODULE_VIEWS.values() for view in view_types}
    declared = {v for v in vars(views).values() if isinstance(v, type)
                and getattr(v, "_is_protocol", False) and v.__module__ == views.__name__}
    assert declared == homed


def _annotated_view(args: ast.arguments) -> str | None:
    """The views.X name annotating an hparams parameter of `args`, if any."""
    for arg in args.args + args.kwonlyargs:
        note = arg.annotation
        if arg.arg in RECEIVERS and isinstance(note, ast.Attribute) and ast.unparse(
                note.value) == "views":
            return note.attr
    return None


def _readers(path: str) -> dict[str, str]:
    """Functions and classes of the module at `path` whose hparams parameter is typed with
    a view: name -> view name."""
    found = {}
    for node in _tree(path).body:
        if isinstance(node, ast.FunctionDef) and _annotated_view(node.args):
            found[node.name] = _annotated_view(node.args)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__" and (
                        _annotated_view(item.args)):
                    found[node.name] = _annotated_view(item.args)
    return found


def _scopes(tree: ast.Module):
    """(function or class node, the view its hparams have): functions with a typed
    hparams parameter, and the methods of classes that set HPARAMS_VIEW."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and _annotated_view(node.args):
            yield node, _annotated_view(node.args)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if (isinstance(item, ast.Assign) and ast.unparse(item.targets[0]) == "HPARAMS_VIEW"
                        and isinstance(item.value, ast.Attribute)):
                    yield node, item.value.attr


def test_a_reader_gets_hparams_whose_view_includes_the_views_of_what_it_calls():
    readers = {(Path(path).stem, name): view for path in _scanned_modules()
               for name, view in _readers(path).items()}
    too_narrow = []
    for path in _scanned_modules():
        stem = Path(path).stem
        for scope, view_name in _scopes(_tree(path)):
            have = _fields(getattr(views, view_name))
            for call in ast.walk(scope):
                if not isinstance(call, ast.Call):
                    continue
                func = call.func
                key = ((func.value.id, func.attr) if isinstance(func, ast.Attribute)
                       and isinstance(func.value, ast.Name) else
                       (stem, func.id) if isinstance(func, ast.Name) else None)
                if key not in readers or key in CONDITIONAL_CALLS:
                    continue
                lacking = _fields(getattr(views, readers[key])) - have
                if lacking:
                    too_narrow.append(f"{path}:{call.lineno} {view_name} -> {key[0]}.{key[1]} "
                                      f"({readers[key]}) lacks {sorted(lacking)}")
    assert not too_narrow, "\n".join(too_narrow)
    assert readers[("common", "initializer")] == "InitializerHParams"
    assert readers[("transformer", "EncoderLayer")] == "TransformerLayerHParams"


def test_the_scan_sees_reads_and_calls():
    tree = ast.parse(
        "def f(hparams, hp, model):\n"
        "    x = hparams.a + model.hparams.b + hp.get('c') + getattr(hp, 'd') + model.e\n"
        "    return 'f' in hparams, hparams.copy(), hp.get(name)\n")
    assert reads(tree) == {"a", "b", "c", "d", "f"}
    assert "z" in named(ast.parse("NAMES = ('z',)"))
    assert HParams(a=1).get("a") == 1
