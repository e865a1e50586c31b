"""Every setting has an effect or is refused.

Each key of every registered hparams set, each field of the config tree (t2t.config:
DecodeHParams and the configs the flags and gin fill) and each flag of t2t's binaries is
read by library code; a Tensor2Tensor hparam name t2t lacks is refused or warned about
by t2t.hparams.t2t_names, whose table the README shows.

"Read" is decided statically (ast over t2t/, nothing imported but the registry and the
configs), with a dynamic complement:
- an hparams key: an attribute load `.KEY` on an hparams-like receiver (hparams, hp,
  model_hparams, x.hparams, x._hparams), or the string "KEY" used in code (getattr(hp,
  "KEY"), "KEY" in hp, a tuple of names a loop reads), outside the hparams set modules
  (which assign keys), docstrings, f-strings and the tables that only name keys
  (`NAME_TABLES`). Dynamically: the keys a real training step reads (HParams reads
  recorded), e.g. the batching keys Batching copies from the hparams by field name.
- a config field: an attribute load `.FIELD` outside t2t/config.py.
- a flag: FLAGS.NAME or FLAGS["NAME"] in t2t/bin/, or "NAME" in the module defining it
  (outside its DEFINE_* and flag_help.group calls); a flag generated from a config field
  (config_flags.define): that field read, and its config built from the flags
  (config_flags.build / given) by a binary.
A failure lists each unread name with where it is defined.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from pathlib import Path

import pytest

from t2t import config, registry
from t2t.hparams.hparams import HParams

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "t2t"
BIN = PACKAGE / "bin"

# Module-level names whose string constants name settings without reading them.
NAME_TABLES = {
    "t2t/hparams/t2t_names.py": {"T2T_HPARAMS"},
    "t2t/trainer/run_dir.py": {"STRUCTURAL_HPARAMS"},
    "t2t/bin/t2t_flag_compat.py": {"T2T_FLAGS"},
}
# Receivers of hparams reads: `hparams.KEY`, `hp.KEY`, `model_hparams.KEY`, `x.hparams.KEY`.
HPARAMS_NAMES = {"hparams", "_hparams", "hp", "model_hparams"}
# Flag-defining modules shared by several binaries: any binary may build their configs.
SHARED_FLAG_MODULES = {"common_flags", "run_flags"}


@functools.cache
def _trees() -> dict[str, ast.Module]:
    """Relative path ("t2t/config.py") -> parsed module, for every file under t2t/."""
    return {p.relative_to(REPO).as_posix(): ast.parse(p.read_text(encoding="utf-8"))
            for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def _registers_hparams(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Attribute) and node.attr.startswith("register_hparams")
               or isinstance(node, ast.Name) and node.id == "register_hparams"
               for node in ast.walk(tree))


def _ignored_constants(tree: ast.Module, tables: set[str]) -> set[int]:
    """ids of the Constant nodes that read nothing: docstrings, f-string parts, and the
    contents of the module-level assignments to `tables`."""
    ignored = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            ignored.update(id(part) for part in node.values)
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                body[0].value, ast.Constant):
            ignored.add(id(body[0].value))
    for statement in tree.body:
        targets = (statement.targets if isinstance(statement, ast.Assign) else
                   [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id in tables for t in targets):
            ignored.update(id(n) for n in ast.walk(statement) if isinstance(n, ast.Constant))
    return ignored


def _strings(tree: ast.Module, path: str) -> set[str]:
    """The string constants of `tree` that code uses (see `_ignored_constants`)."""
    ignored = _ignored_constants(tree, NAME_TABLES.get(path, set()))
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in ignored}


@functools.lru_cache(maxsize=1)
def static_hparams_reads() -> frozenset[str]:
    """Names read from hparams anywhere in t2t/ outside the hparams set modules."""
    return frozenset().union(*(hparams_reads_in(tree, path) for path, tree in _trees().items()
                               if not _registers_hparams(tree)))


def hparams_reads_in(tree: ast.Module, path: str) -> set[str]:
    """The names `tree` (the module at `path`) reads from hparams (see the docstring)."""
    return _strings(tree, path) | {
        node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load) and _receiver_name(node.value) in HPARAMS_NAMES}


def _receiver_name(node: ast.expr) -> str | None:
    """"hparams" for `hparams` and `self.hparams`: the last name of a receiver."""
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)


def _attribute_loads(tree: ast.AST, skip: set[int] = frozenset()) -> set[str]:
    """Names of the attribute loads `x.NAME` in `tree`, outside the nodes `skip`."""
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load) and id(node) not in skip}


def registered_keys() -> dict[str, list[str]]:
    """hparam key -> the registered sets that define it (every set, as the registry's
    lazy discovery imports them)."""
    keys: dict[str, list[str]] = {}
    for name in registry.list_hparams():
        for key in registry.hparams(name)():
            keys.setdefault(key, []).append(name)
    return keys


def _listing(unread: dict[str, list[str]], what: str) -> str:
    lines = [f"  {name}: {', '.join(where[:4])}{' ...' if len(where) > 4 else ''}"
             for name, where in sorted(unread.items())]
    return (f"{len(unread)} {what} that nothing reads: read it where it takes effect, "
            f"remove it, or (a Tensor2Tensor name) refuse it in t2t.hparams.t2t_names:\n"
            + "\n".join(lines))


# ------------------------------------------------------------ the dynamic complement
PROBLEM = "algorithmic_reverse_binary40_test"


@pytest.fixture(scope="module")
def training_reads(tmp_path_factory):
    """(hparams names a real one-step training run read, its trainer, the Keras dtype
    policy it trained under): transformer_test with Tensor2Tensor's
    activation_dtype=bfloat16, every HParams read recorded."""
    import keras

    from t2t.config import TrainerConfig
    from t2t.hparams.basic import create_hparams
    from t2t.trainer.trainer import Trainer

    root = tmp_path_factory.mktemp("reads")
    data_dir = str(root / "data")
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    hparams = create_hparams("transformer_test", "batch_size=128,activation_dtype=bfloat16")
    reads: set[str] = set()
    real_getattr, real_get, real_contains = (HParams.__getattr__, HParams.get,
                                             HParams.__contains__)

    def getattr_(self, name):
        reads.add(name)
        return real_getattr(self, name)

    def get(self, name, default=None):
        reads.add(name)
        return real_get(self, name, default)

    def contains(self, name):
        reads.add(name)
        return real_contains(self, name)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(HParams, "__getattr__", getattr_)
            patch.setattr(HParams, "get", get)
            patch.setattr(HParams, "__contains__", contains)
            trainer = Trainer(problem, "transformer", hparams, data_dir, str(root / "run"),
                              TrainerConfig(train_steps=1, schedule="train", decode_summaries=0,
                                            layer_summaries=False))
            trainer.train()
            policy = keras.mixed_precision.global_policy().name
    finally:
        keras.mixed_precision.set_global_policy("float32")  # other tests build models next
    return frozenset(reads), trainer, policy


def test_every_key_of_every_registered_hparams_set_is_read(training_reads):
    reads = static_hparams_reads() | training_reads[0]
    unread = {key: sets for key, sets in registered_keys().items() if key not in reads}
    assert not unread, _listing(unread, "hparams keys")


def test_the_training_run_reads_what_the_static_scan_cannot_see(training_reads):
    reads, _, _ = training_reads
    # Batching.from_hparams copies these by its field names: no "KEY" or .KEY in t2t/.
    batching = {"batch_shuffle_size", "eval_drop_long_sequences", "length_bucket_step",
                "min_length_bucket", "pack_dataset", "use_fixed_batch_size"}
    assert batching <= reads
    assert {"activation_dtype", "weight_dtype", "learning_rate_schedule", "hidden_size"} <= reads


def test_activation_dtype_bfloat16_trains_in_mixed_bfloat16(training_reads):
    _, trainer, policy = training_reads
    assert policy == "mixed_bfloat16"
    assert trainer.runtime.config.mixed_precision == "bfloat16"
    assert trainer.step == 1
    assert {v.dtype for v in trainer.model.trainable_variables} == {"float32"}  # master weights


# ------------------------------------------------------------------ config fields
@functools.lru_cache(maxsize=1)
def config_field_reads() -> frozenset[str]:
    """Attribute loads anywhere in t2t/, except in t2t/config.py's `validate` methods
    (range checks, not effects)."""
    reads = set()
    for path, tree in _trees().items():
        checks = set()
        if path == "t2t/config.py":
            checks = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                      and f.name == "validate" for n in ast.walk(f)}
        reads |= _attribute_loads(tree, checks)
    return frozenset(reads)


def test_every_config_field_and_decode_hparam_is_read():
    reads = config_field_reads()
    unread = {f"{cls.__name__}.{field.name}": [f"t2t/config.py ({cls.__name__})"]
              for cls in config.CONFIGS for field in dataclasses.fields(cls)
              if field.name not in reads}
    assert not unread, _listing(unread, "config fields")


# --------------------------------------------------------------------------- flags
def _names_of(node: ast.expr | None, module: ast.Module) -> tuple[str, ...] | None:
    """The tuple of names `node` gives (a literal, or a module-level name bound to one)."""
    if node is None:
        return None
    if isinstance(node, ast.Name):
        bound = [s.value for s in module.body if isinstance(s, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == node.id for t in s.targets)]
        assert bound, f"{node.id}: not bound to a literal at module level"
        node = bound[-1]
    return tuple(ast.literal_eval(node))


def config_flag_calls(tree: ast.Module, function: str) -> set[tuple[str, str, str]]:
    """{(config class name, field, flag)} of the config_flags.`function`(config.X, only=,
    exclude=) calls in `tree` ("define", "build" or "given")."""
    from t2t.bin import config_flags

    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == f"config_flags.{function}":
            cls = getattr(config, node.args[0].attr)
            keywords = {k.arg: k.value for k in node.keywords}
            only = _names_of(keywords.get("only"), tree)
            exclude = _names_of(keywords.get("exclude"), tree) or ()
            found |= {(cls.__name__, field.name, flag)
                      for field, flag in config_flags.flag_fields(cls, only, exclude)}
    return found


def _is_definition(call: ast.Call) -> bool:
    name = ast.unparse(call.func)
    return name.startswith("flags.DEFINE_") or name == "flag_help.group"


def plain_flags(tree: ast.Module) -> set[str]:
    """Names of the flags `tree` defines with flags.DEFINE_* (not aliases)."""
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _is_definition(node) and node.args
            and ast.unparse(node.func).startswith("flags.DEFINE_")
            and ast.unparse(node.func) != "flags.DEFINE_alias"
            and isinstance(node.args[0], ast.Constant)}


def flag_reads_in(tree: ast.Module) -> set[str]:
    """FLAGS.NAME and FLAGS["NAME"] in `tree`."""
    reads = {node.attr for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "FLAGS"}
    return reads | {node.slice.value for node in ast.walk(tree)
                    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "FLAGS"
                    and isinstance(node.slice, ast.Constant)}


def strings_outside_definitions(tree: ast.Module, path: str) -> set[str]:
    """The module's code strings, except those in DEFINE_* and flag_help.group calls."""
    inside = {id(n) for call in ast.walk(tree) if isinstance(call, ast.Call)
              and _is_definition(call) for n in ast.walk(call)}
    ignored = _ignored_constants(tree, NAME_TABLES.get(path, set())) | inside
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in ignored}


def _bin_modules() -> dict[str, ast.Module]:
    return {path: tree for path, tree in _trees().items() if path.startswith("t2t/bin/")}


def unread_flags() -> dict[str, list[str]]:
    """--flag -> [where it is defined, and why it counts as unread]."""
    modules = _bin_modules()
    flag_reads = set().union(*(flag_reads_in(tree) for tree in modules.values()))
    all_built = set().union(*(config_flag_calls(tree, f) for tree in modules.values()
                              for f in ("build", "given")))
    unread: dict[str, list[str]] = {}
    for path, tree in modules.items():
        strings = strings_outside_definitions(tree, path)
        for name in plain_flags(tree) - flag_reads - strings:
            unread.setdefault(f"--{name}", []).append(path)
        shared = Path(path).stem in SHARED_FLAG_MODULES
        built = all_built if shared else set().union(
            *(config_flag_calls(tree, f) for f in ("build", "given")))
        for cls, field, flag in config_flag_calls(tree, "define"):
            if field not in config_field_reads() and flag not in flag_reads:
                unread.setdefault(f"--{flag}", []).append(f"{path} ({cls}.{field})")
            elif (cls, field, flag) not in built and flag not in flag_reads:
                unread.setdefault(f"--{flag}", []).append(
                    f"{path} defines it; nothing builds {cls} from it (config_flags.build)")
    return unread


def test_every_flag_of_the_binaries_is_read():
    unread = unread_flags()
    assert not unread, _listing(unread, "flags")
    defined = set().union(*(plain_flags(tree) for tree in _bin_modules().values()))
    assert {"decode_from_file", "dry_run", "translation", "model_name"} <= defined


# ------------------------------------------------------------ the scanner itself
SCANNED = '''"""A module docstring naming key_in_docstring."""
STRUCTURAL_HPARAMS = ("key_in_table",)
flags.DEFINE_string("used_flag", None, "Help naming unused_flag.")
flags.DEFINE_string("unused_flag", None, "Help.")
flags.DEFINE_bool("listed_flag", False, "Help.")
flag_help.group("Group", "unused_flag")


def f(hparams, hp, model):
    """Reads key_in_function_docstring."""
    x = hparams.key_attribute + model.hparams.key_nested + model.key_other_receiver
    y = getattr(hp, "key_getattr") if "key_in" in hp else hp.get("key_get")
    print(f"{x} key_in_fstring", FLAGS.used_flag, [FLAGS[n].value for n in ("listed_flag",)])
'''


def test_the_scanner_sees_reads_not_mentions():
    tree = ast.parse(SCANNED)
    reads = hparams_reads_in(tree, "t2t/trainer/run_dir.py")
    assert {"key_attribute", "key_nested", "key_getattr", "key_in", "key_get"} <= reads
    assert not {"key_other_receiver", "key_in_docstring", "key_in_table",
                "key_in_function_docstring", "key_in_fstring"} & reads
    assert plain_flags(tree) == {"used_flag", "unused_flag", "listed_flag"}
    read = flag_reads_in(tree) | strings_outside_definitions(tree, "t2t/bin/x.py")
    assert plain_flags(tree) - read == {"unused_flag"}


def test_the_scanner_reads_config_flag_definitions():
    tree = ast.parse("NAMES = ('eval_steps',)\n"
                     "config_flags.define(config.TrainerConfig, only=NAMES)\n"
                     "config_flags.define(config.RuntimeConfig, exclude=('tpu',))\n")
    defined = config_flag_calls(tree, "define")
    assert ("TrainerConfig", "eval_steps", "eval_steps") in defined
    assert {c for c, _, _ in defined} == {"TrainerConfig", "RuntimeConfig"}
    assert ("RuntimeConfig", "collective_timeout_s", "collective_timeout") in defined
    assert not any(field in ("tpu", "train_steps") for _, field, _ in defined)
