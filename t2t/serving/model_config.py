"""Which models t2t-serve serves: TF Serving's model config file (--model_config_file), the
version policy and the version labels, checked before anything is applied.

    model_config_list {
      config {
        name: "reverse"
        base_path: "/models/reverse"          # the version folders (t2t-exporter's RUN/export)
        model_platform: "tensorflow"
        model_version_policy { specific { versions: 1 versions: 2 } }
        version_labels { key: "stable" value: 1 }
        version_labels { key: "canary" value: 2 }
      }
    }

The file is TF Serving's text-format ModelServerConfig (tensorflow_serving.config.
model_server_config_pb2); `ModelConfigFile(path).read()` parses it into {name: ModelConfig},
and `configs_from_proto` does the same for a ModelServerConfig message (gRPC's
HandleReloadConfigRequest). Every refusal is a ServerConfigError whose one line names the
file, the entry and the fix; `check_labels` does the checks that need the base path's
versions. `watch_model_config_file` re-reads the file every
--model_config_file_poll_wait_seconds and hands a changed config to the store
(ModelStore.reload_config); a bad one is logged (once per text) and the config that
serves keeps serving. An entry without model_platform is taken as "tensorflow" (TF Serving
requires it); one without model_version_policy serves the newest version (TF Serving's
default, latest 1).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from absl import logging

# A model or label name as it appears in a URL (/v1/models/NAME/labels/LABEL).
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_TF_PLATFORM = "tensorflow"


class ServerConfigError(ValueError):
    """A model path, policy or config the server cannot start with (or apply); the message
    says the fix."""


@dataclasses.dataclass(frozen=True)
class VersionPolicy:
    """Which versions are served: the newest `count` ("latest:N"), "all", or
    "specific:V1,V2"."""

    kind: str = "latest"
    count: int = 2
    versions: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> VersionPolicy:
        kind, _, arg = text.strip().partition(":")
        try:
            if kind == "latest":
                policy = cls("latest", int(arg) if arg else 1)
                if policy.count >= 1:
                    return policy
            elif kind == "all" and not arg:
                return cls("all")
            elif kind == "specific" and arg:
                return cls("specific", 0, tuple(sorted(int(v) for v in arg.split(","))))
        except ValueError:
            pass
        raise ServerConfigError(f"--model_version_policy={text!r}: use latest, latest:N (N >= 1), "
                                "all, or specific:V1,V2")

    @classmethod
    def from_proto(cls, policy: Any, where: str) -> VersionPolicy:
        """TF Serving's ServableVersionPolicy message: latest { num_versions } (unset or 0:
        1, as TF Serving), all {}, specific { versions }; none set: latest 1."""
        choice = policy.WhichOneof("policy_choice")
        if choice == "all":
            return cls("all")
        if choice == "specific":
            if not policy.specific.versions:
                raise ServerConfigError(f"{where}: model_version_policy {{ specific {{ }} }} lists "
                                        "no version; add versions: N (one line per version)")
            return cls("specific", 0, tuple(sorted(set(policy.specific.versions))))
        count = policy.latest.num_versions if choice == "latest" else 1
        return cls("latest", max(count, 1))

    def select(self, available: Collection[int]) -> set[int]:
        if self.kind == "all":
            return set(available)
        if self.kind == "specific":
            return set(self.versions) & set(available)
        return set(sorted(available)[-self.count:])

    def __str__(self) -> str:
        if self.kind == "specific":
            return "specific:" + ",".join(map(str, self.versions))
        return "all" if self.kind == "all" else f"latest:{self.count}"


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """One model of a config: its name, its base path (the folder of version folders, or a
    run folder holding export/), its policy and labels ({label: version}). `where` names
    the entry in error messages ("models.config, config 'reverse'")."""

    name: str
    base_path: str
    policy: VersionPolicy
    labels: Mapping[str, int] = dataclasses.field(default_factory=dict)
    where: str = ""


def configs_from_proto(config: Any, source: str) -> dict[str, ModelConfig]:
    """{name: ModelConfig} of a ModelServerConfig message; `source` names it in errors
    (the file, or "the ReloadConfig request"). Relative base paths are taken from the
    current folder (TF Serving's rule)."""
    if config.WhichOneof("config") == "custom_model_config":
        raise ServerConfigError(f"{source}: custom_model_config is not supported by t2t-serve; "
                                "list the models in model_config_list { config { ... } }")
    entries = list(config.model_config_list.config)
    if not entries:
        raise ServerConfigError(f"{source}: model_config_list has no config entry; add "
                                "config { name: \"NAME\" base_path: \"DIR\" } for each model")
    configs: dict[str, ModelConfig] = {}
    for index, entry in enumerate(entries, 1):
        where = f"{source}, config #{index}" + (f" ({entry.name!r})" if entry.name else "")
        model = _model_config(entry, where)
        if model.name in configs:
            raise ServerConfigError(f"{where}: the name {model.name!r} is also used by "
                                    f"{configs[model.name].where.rpartition(', ')[2]}; give "
                                    "each model its own name")
        configs[model.name] = model
    return configs


def _model_config(entry: Any, where: str) -> ModelConfig:
    """One ModelConfig message, checked (the disk is not looked at: check_labels)."""
    if not entry.name or not _NAME.fullmatch(entry.name):
        raise ServerConfigError(f"{where}: name {entry.name!r} cannot be a URL's model name; "
                                "use letters, digits, '_', '.' and '-'")
    platform = entry.model_platform or _TF_PLATFORM
    if platform != _TF_PLATFORM or entry.model_type not in (0, 1):  # UNSPECIFIED, TENSORFLOW
        shown = entry.model_platform or f"model_type {entry.model_type}"
        raise ServerConfigError(f"{where}: model_platform {shown!r} is not supported; t2t-serve "
                                "serves SavedModels: model_platform: \"tensorflow\"")
    if entry.HasField("logging_config"):
        raise ServerConfigError(f"{where}: logging_config (request logging) is not supported "
                                "by t2t-serve; remove it")
    if not entry.base_path:
        raise ServerConfigError(f"{where}: no base_path; give the folder that t2t-exporter "
                                "wrote (RUN/export) as base_path: \"DIR\"")
    policy = VersionPolicy.from_proto(entry.model_version_policy, where)
    labels = dict(entry.version_labels)
    for label, version in sorted(labels.items()):
        if not _NAME.fullmatch(label) or label.isdigit():
            raise ServerConfigError(f"{where}: version label {label!r} cannot be a URL's label; "
                                    "use letters, digits, '_', '.' and '-', not only digits")
        if policy.kind == "specific" and version not in policy.versions:
            raise ServerConfigError(
                f"{where}: version label {label!r} points at version {version}, outside "
                f"model_version_policy specific {list(policy.versions)}; add versions: "
                f"{version} to the policy or point the label at one of those")
    return ModelConfig(entry.name, os.path.abspath(os.path.expanduser(entry.base_path)),
                       policy, labels, where)


def parse_model_config(text: str, source: str) -> dict[str, ModelConfig]:
    """{name: ModelConfig} of a text-format ModelServerConfig (TF Serving's
    --model_config_file); `source` names the file in errors."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as e:
        raise ServerConfigError(f"{source}: not a text-format ModelServerConfig (line:column "
                                f"{e}); see TF Serving's model_config_list {{ config {{ ... }} }} "
                                "format") from None
    return configs_from_proto(config, source)


def check_labels(config: ModelConfig, on_disk: Collection[int], labels_in_use: Mapping[str, int],
                 allow_unavailable: bool) -> None:
    """Refuses a label `config` may not have, given the versions in its base path
    (`on_disk`) and the labels now served ({label: version}): a label must point at a
    version the policy serves; one not in the folder yet only with
    --allow_version_labels_for_unavailable_models, and only a label not in use (TF Serving's
    rule: a label clients already use never points at nothing)."""
    for label, version in sorted(config.labels.items()):
        if version in on_disk and version not in config.policy.select(on_disk):
            raise ServerConfigError(
                f"{config.where}: version label {label!r} points at version {version}, which "
                f"model_version_policy {config.policy} does not serve (it serves "
                f"{sorted(config.policy.select(on_disk))}); change the policy or the label")
        if version in on_disk:
            continue
        if not allow_unavailable:
            raise ServerConfigError(
                f"{config.where}: version label {label!r} points at version {version}, which is "
                f"not in the base path (versions there: {sorted(on_disk)}); export it first, or "
                "start t2t-serve with --allow_version_labels_for_unavailable_models")
        if label in labels_in_use and labels_in_use[label] != version:
            raise ServerConfigError(
                f"{config.where}: version label {label!r} is in use (version "
                f"{labels_in_use[label]}) and would point at version {version}, which is not in "
                "the base path; export it first: a label in use only moves to a version that "
                "exists")


class ModelConfigFile:
    """The --model_config_file: `read()` parses it and remembers the text it read."""

    def __init__(self, path: str):
        self.path = os.path.abspath(os.path.expanduser(path))
        self.text: str | None = None  # the text of the last read

    def read_text(self) -> str:
        try:
            with open(self.path, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise ServerConfigError(f"--model_config_file={self.path}: cannot be read "
                                    f"({type(e).__name__}: {e.strerror or e}); give a "
                                    "readable text-format ModelServerConfig") from None

    def read(self) -> dict[str, ModelConfig]:
        text = self.read_text()
        configs = parse_model_config(text, self.path)
        self.text = text
        return configs


async def watch_model_config_file(
        config_file: ModelConfigFile, poll_seconds: float,
        apply: Callable[[dict[str, ModelConfig]], Awaitable[None]]) -> None:
    """Every `poll_seconds`, re-reads `config_file` and awaits `apply(configs)` when its text
    changed since the last one applied. A file that cannot be read, parsed or applied is
    logged once per text (and tried again each poll: a label may wait for an export);
    what serves keeps serving. Runs until cancelled."""
    applied, logged = config_file.text, None
    while True:
        await asyncio.sleep(poll_seconds)
        text = None
        try:
            text = config_file.read_text()
            if text == applied:
                continue
            await apply(parse_model_config(text, config_file.path))
            applied = config_file.text = text
            logged = None
            logging.info("t2t-serve: applied the model config file %s.", config_file.path)
        except ServerConfigError as e:
            if logged != (text, str(e)):
                logging.error("t2t-serve: the model config file was not applied, the previous "
                              "config keeps serving: %s", e)
                logged = (text, str(e))
        except Exception:  # noqa: BLE001 - a failed reload must not stop serving
            logging.exception("t2t-serve: applying the model config file %s failed; the "
                              "previous config keeps serving", config_file.path)
            applied = text  # not retried until the file changes
