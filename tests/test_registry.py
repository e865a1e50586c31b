"""Tests of t2t.registry: names, decorators, errors, `_rev`, discovery and plugins."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
import textwrap

import pytest

from t2t import registry

# Every name registered here starts with this prefix, so nothing clashes with real entries.
PREFIX = "zz_t2t_test_registry_"

KINDS = {
    "problem": (registry.register_problem, registry.problem_class),
    "model": (registry.register_model, registry.model),
    "hparams": (registry.register_hparams, registry.hparams),
    "ranged_hparams": (registry.register_ranged_hparams, registry.ranged_hparams),
}


@pytest.fixture
def cleanup():
    """Collects (kind, name) pairs and unregisters them after the test."""
    registered: list[tuple[str, str]] = []
    yield registered
    for kind, name in registered:
        registry.REGISTRIES[kind].unregister(name)


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=60, env=env,
    )


# ------------------------------------------------------------------ default_name
@pytest.mark.parametrize("class_name, expected", [
    ("TranslateEndeWmt32k", "translate_ende_wmt32k"),
    ("LSTMSeq2seq", "lstm_seq2seq"),
    ("AlgorithmicReverseBinary40Test", "algorithmic_reverse_binary40_test"),
    ("Transformer", "transformer"),
    ("ImageCifar10", "image_cifar10"),
])
def test_default_name_snake_cases_class_names(class_name, expected):
    assert registry.default_name(type(class_name, (), {})) == expected


def test_default_name_of_a_function_keeps_snake_case():
    def transformer_base_v2():
        pass

    assert registry.default_name(transformer_base_v2) == "transformer_base_v2"


# ------------------------------------------------------------------ decorators
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_bare_decorator_registers_under_default_name(kind, cleanup):
    register, lookup = KINDS[kind]

    @register
    class ZzT2tTestRegistryBare:
        pass

    name = "zz_t2t_test_registry_bare"
    cleanup.append((kind, name))
    assert registry.default_name(ZzT2tTestRegistryBare) == name
    assert lookup(name) is ZzT2tTestRegistryBare
    assert ZzT2tTestRegistryBare.registered_name == name
    assert name in registry.REGISTRIES[kind].names()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_decorator_with_explicit_name(kind, cleanup):
    register, lookup = KINDS[kind]
    name = PREFIX + kind + "_explicit"
    cleanup.append((kind, name))

    @register(name)
    def some_function():
        return 42

    assert lookup(name) is some_function
    assert lookup(name)() == 42
    # The default name is not registered as well.
    assert "some_function" not in registry.REGISTRIES[kind].names()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_plain_call_with_name_keyword(kind, cleanup):
    register, lookup = KINDS[kind]
    name = PREFIX + kind + "_call"
    cleanup.append((kind, name))

    def fn():
        pass

    assert register(fn, name=name) is fn
    assert lookup(name) is fn


def test_list_functions_return_sorted_names_of_their_kind(cleanup):
    name = PREFIX + "listed_hparams"
    cleanup.append(("hparams", name))
    registry.register_hparams(lambda: None, name=name)

    hparams_names = registry.list_hparams()
    assert hparams_names == sorted(hparams_names)
    assert name in hparams_names
    assert "basic_params1" in hparams_names
    assert name not in registry.list_problems()
    assert name not in registry.list_models()
    assert name not in registry.list_ranged_hparams()
    assert "basic_range1" in registry.list_ranged_hparams()
    problems = registry.list_problems()
    assert problems == sorted(problems)
    assert "algorithmic_reverse_binary40_test" in problems
    assert isinstance(registry.list_models(), list)


def test_invalid_name_is_refused():
    with pytest.raises(ValueError, match="Invalid hparams name 'Bad-Name'"):
        registry.register_hparams(lambda: None, name="Bad-Name")
    assert "Bad-Name" not in registry.REGISTRIES["hparams"].names()


# ------------------------------------------------------------------ duplicates
def test_duplicate_name_is_refused_with_both_locations(cleanup):
    name = PREFIX + "duplicate"
    cleanup.append(("hparams", name))

    @registry.register_hparams(name)
    def first():
        pass

    def second():
        pass

    with pytest.raises(registry.DuplicateNameError) as info:
        registry.register_hparams(second, name=name)

    message = str(info.value)
    source = os.path.abspath(__file__)
    assert f"{source}:{first.__code__.co_firstlineno}" in message
    assert f"{source}:{second.__code__.co_firstlineno}" in message
    assert first.__code__.co_firstlineno != second.__code__.co_firstlineno
    assert "existing" in message and "duplicate" in message
    assert isinstance(info.value, ValueError)
    # The first registration is kept.
    assert registry.hparams(name) is first


def test_duplicate_class_names_across_kinds_are_independent(cleanup):
    name = PREFIX + "shared_between_kinds"
    cleanup.extend([("model", name), ("hparams", name)])

    def as_model():
        pass

    def as_hparams():
        pass

    registry.register_model(as_model, name=name)
    registry.register_hparams(as_hparams, name=name)
    assert registry.model(name) is as_model
    assert registry.hparams(name) is as_hparams


def test_reregistering_the_same_object_is_allowed(cleanup):
    name = PREFIX + "same_object"
    cleanup.append(("problem", name))

    class Thing:
        pass

    registry.register_problem(Thing, name=name)
    assert registry.register_problem(Thing, name=name) is Thing  # e.g. a module re-import
    assert registry.problem_class(name) is Thing


def test_redefinition_at_the_same_location_replaces_the_entry(cleanup):
    """A module that is executed again (reload) defines new objects at the same lines."""
    name = PREFIX + "same_location"
    cleanup.append(("hparams", name))
    made = []
    for i in range(2):
        def fn(i=i):
            return i

        made.append(fn)
        registry.register_hparams(fn, name=name)
    assert made[0] is not made[1]
    assert registry.hparams(name)() == 1
    assert registry.REGISTRIES["hparams"].location(name).endswith(
        f":{made[1].__code__.co_firstlineno}")


# ------------------------------------------------------------------ unknown names
def test_unknown_problem_lists_close_matches():
    with pytest.raises(registry.UnknownNameError) as info:
        registry.problem("algorithmic_reverse_binary4")
    message = str(info.value)
    assert message.startswith("Unknown problem 'algorithmic_reverse_binary4'.")
    assert "Did you mean:" in message
    assert "algorithmic_reverse_binary40" in message
    assert "--registry_help" in message and "--t2t_usr_dir" in message
    assert isinstance(info.value, KeyError)
    assert not message.startswith('"')  # str() is the message, not KeyError's repr


def test_unknown_model_lists_close_matches(cleanup):
    name = PREFIX + "transformer_model"
    cleanup.append(("model", name))
    registry.register_model(type("M", (), {}), name=name)
    with pytest.raises(registry.UnknownNameError, match="Unknown model") as info:
        registry.model(PREFIX + "transformr_model")
    assert f"Did you mean: {name}" in str(info.value)


def test_unknown_hparams_lists_close_matches():
    with pytest.raises(registry.UnknownNameError) as info:
        registry.hparams("basic_params2")
    message = str(info.value)
    assert "Unknown hparams 'basic_params2'" in message
    assert "basic_params1" in message.split("Did you mean:")[1]


def test_unknown_ranged_hparams_lists_close_matches():
    with pytest.raises(registry.UnknownNameError) as info:
        registry.ranged_hparams("basic_rang1")
    message = str(info.value)
    assert "Unknown ranged_hparams 'basic_rang1'" in message
    assert "basic_range1" in message.split("Did you mean:")[1]


def test_unknown_name_without_any_close_match_has_no_suggestion():
    with pytest.raises(registry.UnknownNameError) as info:
        registry.hparams("qqqqqqqqqqqqqqqqqqqq")
    message = str(info.value)
    assert "Did you mean" not in message
    # The message names list functions that exist.
    assert "t2t.registry.list_hparams()" in message
    assert callable(registry.list_hparams)


def test_close_matches_uses_similarity_then_substrings():
    candidates = ["transformer_base", "transformer_big", "lstm_seq2seq", "transformer_base_v2"]
    assert registry.close_matches("transformer_bas", candidates)[0] == "transformer_base"
    # A short substring is not similar enough for difflib but still suggested.
    assert "lstm_seq2seq" in registry.close_matches("lstm", candidates)
    assert registry.close_matches("zzz", candidates) == []
    assert len(registry.close_matches("transformer", candidates * 3, n=2)) == 2


# ------------------------------------------------------------------ _rev
def test_rev_suffix_gives_a_reversed_problem():
    problem = registry.problem("algorithmic_reverse_binary40_test_rev")
    assert problem.was_reversed
    assert problem.name == "algorithmic_reverse_binary40_test_rev"
    assert problem.base_name == "algorithmic_reverse_binary40_test"
    assert problem.dataset_filename() == "algorithmic_reverse_binary40_test"

    forward = registry.problem("algorithmic_reverse_binary40_test")
    assert not forward.was_reversed
    assert forward.name == "algorithmic_reverse_binary40_test"
    assert type(forward) is type(problem)


def test_rev_rev_is_refused_with_a_helpful_message():
    with pytest.raises(ValueError) as info:
        registry.problem("algorithmic_reverse_binary40_test_rev_rev")
    message = str(info.value)
    assert "reverses twice" in message
    assert "'algorithmic_reverse_binary40_test'" in message
    assert "'algorithmic_reverse_binary40_test_rev'" in message


def test_unknown_rev_problem_names_the_base():
    with pytest.raises(registry.UnknownNameError, match="algorithmic_reverse_binary4'"):
        registry.problem("algorithmic_reverse_binary4_rev")


def test_a_problem_registered_with_a_rev_name_is_not_reversed(cleanup):
    from t2t.problems.algorithmic_tasks import algorithmic

    name = PREFIX + "really_named_rev"
    cleanup.append(("problem", name))

    class Special(algorithmic.AlgorithmicReverseBinary40Test):
        pass

    registry.register_problem(Special, name=name)
    problem = registry.problem(name)
    assert isinstance(problem, Special)
    assert not problem.was_reversed
    assert problem.name == name


# ------------------------------------------------------------------ problem families
class _Built:
    """What the test family builds: remembers the name and direction it was built for."""

    def __init__(self, name: str, was_reversed: bool = False):
        self.name, self.was_reversed = name, was_reversed


@pytest.fixture
def family():
    """Registers the family `zz_t2t_test_registry_fam_` and records its calls."""
    prefix = PREFIX + "fam_"
    calls: list[tuple] = []

    def make_problem(name, was_reversed):
        if name.endswith("_missing"):
            raise registry.UnknownNameError(f"Unknown problem {name!r}: not in the family.")
        calls.append(("problem", name, was_reversed))
        return _Built(name, was_reversed)

    def make_class(name):
        calls.append(("class", name))
        return _Built

    registry.register_problem_family(prefix, make_problem, make_class)
    yield prefix, calls
    registry.unregister_problem_family(prefix)


def test_problem_family_builds_unregistered_names(family):
    prefix, calls = family
    built = registry.problem(prefix + "anything")
    assert isinstance(built, _Built) and built.name == prefix + "anything"
    assert not built.was_reversed
    assert registry.problem_class(prefix + "other") is _Built
    assert calls == [("problem", prefix + "anything", False), ("class", prefix + "other")]


def test_problem_family_gets_rev_split_off(family):
    prefix, calls = family
    built = registry.problem(prefix + "thing_rev")
    assert built.name == prefix + "thing" and built.was_reversed
    with pytest.raises(registry.BadProblemNameError, match="reverses twice"):
        registry.problem(prefix + "thing_rev_rev")
    assert calls == [("problem", prefix + "thing", True)]


def test_registered_names_win_over_their_family(family, cleanup):
    from t2t.problems.algorithmic_tasks import algorithmic

    prefix, calls = family
    name = prefix + "registered"
    cleanup.append(("problem", name))

    class Registered(algorithmic.AlgorithmicReverseBinary40Test):  # registering sets
        pass  # registered_name on the class: never register a shared class here

    registry.register_problem(Registered, name=name)
    assert isinstance(registry.problem(name), Registered)
    assert registry.problem_class(name) is Registered
    assert calls == []


def test_problem_family_errors_and_other_names_are_unchanged(family):
    prefix, _ = family
    with pytest.raises(registry.UnknownNameError, match="not in the family"):
        registry.problem(prefix + "x_missing")
    with pytest.raises(registry.UnknownNameError, match="Did you mean:"):
        registry.problem("algorithmic_reverse_binary4")


def test_longest_matching_family_prefix_wins(family):
    prefix, _ = family
    longer = prefix + "special_"
    registry.register_problem_family(longer, lambda n, r: ("longer", n, r), lambda n: "longer")
    try:
        assert registry.problem(longer + "x") == ("longer", longer + "x", False)
        assert registry.problem_class(longer + "x") == "longer"
        assert isinstance(registry.problem(prefix + "x"), _Built)
    finally:
        registry.unregister_problem_family(longer)


def test_problem_family_prefix_checks(family):
    prefix, _ = family
    with pytest.raises(ValueError, match="Invalid problem family prefix"):
        registry.register_problem_family("Bad-", lambda n, r: None, lambda n: type)
    with pytest.raises(registry.DuplicateNameError, match="already registered"):
        registry.register_problem_family(prefix, lambda n, r: None, lambda n: type)


def test_the_tfds_family_is_registered_by_discovery_not_by_the_registry():
    import ast

    source = open(registry.__file__).read()
    imported = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            imported.append(node.module or "")
    assert not [m for m in imported if m.startswith(("t2t", "tensorflow", "keras"))], imported
    result = _python("""
        import sys
        from t2t import registry
        cls = registry.problem_class("tfds_imdb_reviews")
        print("MODULE", cls.__module__)
        print("HEAVY", sorted(m for m in ("tensorflow", "keras") if m in sys.modules))
    """)
    assert result.returncode == 0, result.stderr
    assert "MODULE t2t.data.tfds.adapter" in result.stdout
    assert "HEAVY []" in result.stdout


# ------------------------------------------------------------------ help
def test_help_string_lists_every_kind():
    text = registry.help_string()
    lines = text.splitlines()
    assert "  algorithmic_reverse_binary40_test" in lines
    assert "  basic_params1" in lines
    assert "  basic_range1" in lines
    problems_header = f"problems ({len(registry.list_problems())}):"
    assert problems_header in lines
    assert f"hparams ({len(registry.list_hparams())}):" in lines
    assert any(line.startswith("models (") for line in lines)
    assert f"ranged_hparams ({len(registry.list_ranged_hparams())}):" in lines
    assert "_rev" in text


# ------------------------------------------------------------------ subprocesses
def test_importing_and_listing_does_not_import_tensorflow():
    result = _python("""
        import sys, time
        start = time.perf_counter()
        from t2t import registry
        import_seconds = time.perf_counter() - start
        problems = registry.list_problems()
        hparams = registry.list_hparams()
        registry.list_ranged_hparams()
        registry.problem("algorithmic_reverse_binary40_test")
        assert "algorithmic_reverse_binary40_test" in problems, problems
        assert "basic_params1" in hparams, hparams
        assert "t2t.problems.algorithmic_tasks.algorithmic" in sys.modules  # discovery really ran
        heavy = sorted(m for m in ("tensorflow", "keras") if m in sys.modules)
        print(f"IMPORT_SECONDS={import_seconds:.4f}")
        print(f"HEAVY={heavy}")
    """)
    assert result.returncode == 0, result.stderr
    assert "HEAVY=[]" in result.stdout, result.stdout
    seconds = float(result.stdout.split("IMPORT_SECONDS=")[1].split()[0])
    print(f"`from t2t import registry` took {seconds * 1000:.1f} ms")
    assert seconds < 1.0


def test_plugin_entry_point_registers_a_problem(tmp_path):
    module = "zz_t2t_test_plugin_module"
    problem_name = "zz_t2t_test_plugin_problem"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(f"""
        from t2t import registry
        from t2t.problems import algorithmic

        @registry.register_problem({problem_name!r})
        class PluginProblem(algorithmic.AlgorithmicReverseBinary40Test):
            pass
    """))
    dist_info = tmp_path / "zz_t2t_test_plugin-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: zz-t2t-test-plugin\nVersion: 0.1\n"
    )
    (dist_info / "entry_points.txt").write_text(f"[t2t.plugins]\nzz_plugin = {module}\n")

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    result = _python(f"""
        import sys
        from t2t import registry
        assert {module!r} not in sys.modules  # plugins load lazily
        problem = registry.problem({problem_name!r})
        print("NAME", problem.name, type(problem).__name__)
        print("REV", registry.problem({problem_name!r} + "_rev").was_reversed)
        print("LISTED", {problem_name!r} in registry.list_problems())
        print("AGAIN", registry.load_plugins())  # loaded once only
    """, env=env)
    assert result.returncode == 0, result.stderr
    assert f"NAME {problem_name} PluginProblem" in result.stdout
    assert "REV True" in result.stdout
    assert "LISTED True" in result.stdout
    assert "AGAIN []" in result.stdout


def test_discovery_imports_subpackages_but_not_private_names(tmp_path, monkeypatch):
    root = tmp_path / "zz_t2t_discovery_pkg"
    files = [
        "__init__.py", "a.py", "_private.py",
        "research/__init__.py", "research/b.py", "research/_hidden.py",
        "_internal/__init__.py", "_internal/c.py",
    ]
    for relative in files:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        # Each module records its import in a list the test reads back.
        path.write_text("import builtins\nbuiltins.zz_imported.append(__name__)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(builtins, "zz_imported", [], raising=False)
    registry.Registry("model", ("zz_t2t_discovery_pkg",)).discover()
    pkg = "zz_t2t_discovery_pkg"
    assert builtins.zz_imported == [pkg, f"{pkg}.a", f"{pkg}.research", f"{pkg}.research.b"]
