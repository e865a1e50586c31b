"""TF Serving's model config file as t2t-serve reads it (t2t/serving/model_config.py): the
text format parsed into per-model policies and labels, and every refusal, at parse time,
against the base path's versions, and from t2t-serve's flags. No model is loaded: the
version folders here hold an empty saved_model.pb, which is all the checks look at."""

import os

import pytest

from t2t.serving.batching import BatchingOptions
from t2t.serving.model_config import (
    ModelConfigFile,
    ServerConfigError,
    VersionPolicy,
    check_labels,
    parse_model_config,
)
from t2t.serving.model_store import ModelStore
from tests.helpers.binaries import run_binary

FULL = """
model_config_list {
  config {
    name: "reverse"
    base_path: "%(base)s"
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 2 versions: 1 } }
    version_labels { key: "stable" value: 1 }
    version_labels { key: "canary" value: 2 }
  }
  config { name: "newest" base_path: "%(base)s" model_version_policy { latest { } } }
  config { name: "three" base_path: "%(base)s" model_version_policy { latest { num_versions: 3 } } }
  config { name: "every" base_path: "%(base)s" model_version_policy { all { } } }
  config { name: "plain" base_path: "%(base)s" }
}
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A base path with versions 1, 2 and 3 (empty saved_model.pb: never loaded here)."""
    folder = tmp_path_factory.mktemp("versions")
    for version in (1, 2, 3):
        os.makedirs(folder / str(version))
        (folder / str(version) / "saved_model.pb").write_bytes(b"")
    return str(folder)


def test_the_file_becomes_one_policy_and_label_map_per_model(base):
    configs = parse_model_config(FULL % {"base": base}, "models.config")
    assert list(configs) == ["reverse", "newest", "three", "every", "plain"]
    reverse = configs["reverse"]
    assert reverse.base_path == base and reverse.labels == {"stable": 1, "canary": 2}
    assert reverse.policy == VersionPolicy("specific", 0, (1, 2))
    # TF Serving's defaults: latest {} and no policy at all serve the newest version.
    assert [str(configs[n].policy) for n in ("newest", "three", "every", "plain")] == [
        "latest:1", "latest:3", "all", "latest:1"]
    assert configs["every"].policy.select([1, 2, 3]) == {1, 2, 3}
    assert reverse.where == "models.config, config #1 ('reverse')"


def _entry(body, extra=""):
    return f'model_config_list {{ config {{ {body} }} {extra} }}'


@pytest.mark.parametrize("text, expected", [
    ("model_config_list { config { nmae: 'x' } }",
     ['models.config: not a text-format ModelServerConfig', 'no field named "nmae"',
      "model_config_list { config { ... } }"]),
    (_entry('name: "a" base_path: "/m" model_platform: "pytorch"'),
     ["config #1 ('a'): model_platform 'pytorch' is not supported",
      'model_platform: "tensorflow"']),
    (_entry('name: "a" base_path: "/m"', 'config { name: "a" base_path: "/n" }'),
     ["config #2 ('a'): the name 'a' is also used by config #1", "its own name"]),
    (_entry('name: "a" base_path: "/m" model_version_policy { specific { versions: 1 } } '
            'version_labels { key: "stable" value: 2 }'),
     ["config #1 ('a'): version label 'stable' points at version 2, outside "
      "model_version_policy specific [1]", "add versions: 2 to the policy"]),
    (_entry('name: "a"'), ["config #1 ('a'): no base_path", 'base_path: "DIR"']),
    (_entry('name: "a" base_path: "/m" model_version_policy { specific { } }'),
     ["lists no version", "versions: N"]),
    (_entry('name: "a/b" base_path: "/m"'), ["name 'a/b' cannot be a URL's model name"]),
    (_entry('base_path: "/m"'), ["config #1: name '' cannot be"]),
    (_entry('name: "a" base_path: "/m" version_labels { key: "1" value: 1 }'),
     ["version label '1' cannot be a URL's label", "not only digits"]),
    (_entry('name: "a" base_path: "/m" logging_config { }'),
     ["logging_config (request logging) is not supported", "remove it"]),
    ("model_config_list { }", ["has no config entry", 'config { name: "NAME"']),
    ("custom_model_config { }", ["custom_model_config is not supported", "model_config_list"]),
])
def test_a_bad_file_is_refused_naming_the_file_the_entry_and_the_fix(text, expected):
    with pytest.raises(ServerConfigError) as error:
        parse_model_config(text, "models.config")
    message = str(error.value)
    assert message.startswith("models.config") and "\n" not in message
    for part in expected:
        assert part in message, message


def test_labels_are_checked_against_the_versions_in_the_base_path(base):
    configs = parse_model_config(_entry(
        f'name: "a" base_path: "{base}" model_version_policy {{ latest {{ num_versions: 2 }} }} '
        'version_labels { key: "stable" value: 1 } version_labels { key: "next" value: 4 }'),
        "m.config")
    with pytest.raises(ServerConfigError, match=r"m.config, config #1 \('a'\): version label "
                       r"'next' points at version 4, which is not in the base path \(versions "
                       r"there: \[1, 2, 3\]\); export it first, or start t2t-serve with "
                       r"--allow_version_labels_for_unavailable_models"):
        check_labels(configs["a"], [1, 2, 3], {}, allow_unavailable=False)
    # latest:2 of 1, 2, 3 serves 2 and 3: version 1 is outside the policy, flag or not.
    with pytest.raises(ServerConfigError, match=r"version label 'stable' points at version 1, "
                       r"which model_version_policy latest:2 does not serve \(it serves \[2, "
                       r"3\]\); change the policy or the label"):
        check_labels(configs["a"], [1, 2, 3], {}, allow_unavailable=True)
    moved = parse_model_config(_entry(
        f'name: "a" base_path: "{base}" version_labels {{ key: "next" value: 4 }}'), "m.config")
    check_labels(moved["a"], [1, 2, 3], {}, allow_unavailable=True)  # a new label may wait
    with pytest.raises(ServerConfigError, match=r"'next' is in use \(version 3\) and would "
                       r"point at version 4, which is not in the base path; export it first"):
        check_labels(moved["a"], [1, 2, 3], {"next": 3}, allow_unavailable=True)


def test_the_store_refuses_a_missing_base_path_and_an_unavailable_label(base, tmp_path):
    missing = parse_model_config(_entry(f'name: "a" base_path: "{tmp_path}/nope"'), "m.config")
    with pytest.raises(ServerConfigError, match=rf"^m.config, config #1 \('a'\): model base "
                       rf"path {tmp_path}/nope does not exist; give the folder that "
                       "t2t-exporter wrote"):
        ModelStore(missing, VersionPolicy(), BatchingOptions())
    label = parse_model_config(_entry(
        f'name: "a" base_path: "{base}" version_labels {{ key: "stable" value: 9 }}'), "m.config")
    with pytest.raises(ServerConfigError, match="'stable' points at version 9, which is not in "
                       "the base path"):
        ModelStore(label, VersionPolicy(), BatchingOptions())
    store = ModelStore(label, VersionPolicy(), BatchingOptions(),
                       allow_version_labels_for_unavailable_models=True)
    assert store.models["a"].configured_labels == {"stable": 9}


def test_model_config_file_reads_and_remembers_the_text(base, tmp_path):
    path = tmp_path / "models.config"
    text = _entry(f'name: "a" base_path: "{base}"')
    path.write_text(text)
    config_file = ModelConfigFile(str(path))
    assert list(config_file.read()) == ["a"] and config_file.text == text
    with pytest.raises(ServerConfigError, match=rf"--model_config_file={tmp_path}/gone.config: "
                       "cannot be read \\(FileNotFoundError: No such file or directory\\)"):
        ModelConfigFile(str(tmp_path / "gone.config")).read()


def _serve_error(*flags):
    result = run_binary("t2t-serve", *flags)
    assert result.code == 1 and not result.traceback, result.err[-3000:]
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.err[-3000:]
    return errors[0]


def test_t2t_serve_refuses_a_config_file_with_model_flags_or_errors(base, tmp_path):
    good = tmp_path / "good.config"
    good.write_text(_entry(f'name: "a" base_path: "{base}"'))
    assert _serve_error(f"--model_config_file={good}", f"--model_base_path={base}",
                        "--model_version_policy=all") == (
        "error: --model_config_file names the models, their base paths and version policies: "
        "drop --model_base_path, --model_version_policy, or drop --model_config_file")
    bad = tmp_path / "bad.config"
    bad.write_text(_entry(f'name: "a" base_path: "{base}" model_platform: "onnx"'))
    assert _serve_error(f"--model_config_file={bad}") == (
        f"error: {bad}, config #1 ('a'): model_platform 'onnx' is not supported; t2t-serve "
        'serves SavedModels: model_platform: "tensorflow"')
    assert "give seconds >= 0" in _serve_error(f"--model_config_file={good}",
                                               "--model_config_file_poll_wait_seconds=-1")
