"""A Kubernetes `TFJob` (Kubeflow training operator, kubeflow.org/v1) for a t2t command.

    manifest = tfjob_manifest("wmt-big", "gcr.io/me/t2t:1", ["t2t-trainer", ...],
                              Layout(num_workers=4), gpus_per_worker=8)
    print(to_yaml(manifest))   # or to_json(manifest); kubectl takes either

The replica types follow `tf_config.Layout`: Worker only (MultiWorkerMirroredStrategy,
worker 0 is the chief), Chief + Worker with `chief=True`, Chief + Worker + PS with
`num_ps` > 0 (ParameterServerStrategy; the chief is the coordinator). The operator
creates the pods and gives each its TF_CONFIG; every replica runs the same command in a
container named "tensorflow" (the operator requires that name). GPUs
(`nvidia.com/gpu` limits) go to the replicas that compute: Workers, and the Chief of a
MultiWorkerMirroredStrategy job; never to the coordinator or the parameter servers.

The YAML is written by hand (no YAML dependency): a string is left plain only when it
starts with a letter and holds nothing but letters, digits and `._/-` (and is no YAML
boolean or null); any other is double-quoted with escapes, so no value can be misread
(as a number, a boolean, a comment, ...).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from t2t.cluster.tf_config import CHIEF, PS, WORKER, Layout

API_VERSION = "kubeflow.org/v1"
KIND = "TFJob"
CONTAINER_NAME = "tensorflow"  # the training operator finds the TF container by this name
GPU_RESOURCE = "nvidia.com/gpu"
REPLICA_TYPES = {CHIEF: "Chief", WORKER: "Worker", PS: "PS"}
MAX_LABEL = 63  # Kubernetes names of pods' services: DNS labels of at most 63 characters


class ManifestError(ValueError):
    """A bad TFJob argument (name, image, command, counts); the message says which."""


def _check_label(value: str, flag: str, first_letter: bool) -> str:
    """A DNS label: lowercase letters, digits and '-', starting with a letter (RFC 1035)
    or an alphanumeric (RFC 1123), ending with an alphanumeric, at most 63 characters."""
    what = f"{flag}={value!r}"
    rfc = "RFC 1035" if first_letter else "RFC 1123"
    if not value:
        raise ManifestError(f"{flag} is required: a DNS label ({rfc}), e.g. t2t-transformer.")
    if len(value) > MAX_LABEL:
        raise ManifestError(f"{what} is {len(value)} characters long; at most {MAX_LABEL}.")
    bad = sorted({c for c in value if not (c.isascii() and (c.islower() or c.isdigit())
                                           or c == "-")})
    if bad:
        raise ManifestError(f"{what} has {''.join(bad)!r}: only lowercase letters, digits "
                            f"and '-' are allowed ({rfc} label), e.g. "
                            f"{re.sub('[^a-z0-9-]+', '-', value.lower()).strip('-')!r}.")
    if first_letter and not value[0].isalpha():
        raise ManifestError(f"{what} must start with a letter (the training operator wants "
                            f"an {rfc} label).")
    if not value[0].isalnum() or not value[-1].isalnum():
        raise ManifestError(f"{what} must start and end with a letter or digit ({rfc}).")
    return value


def validate_name(name: str, layout: Layout | None = None) -> str:
    """The TFJob's name: the training operator wants a DNS-1035 label (RFC 1035: a
    stricter RFC 1123 label that starts with a letter), and it names pods and services
    NAME-worker-INDEX, which must fit in 63 characters too."""
    _check_label(name, "--name", first_letter=True)
    if layout is not None:
        longest = max((f"{name}-{t}-{n - 1}" for t, n in layout.counts().items()), key=len)
        if len(longest) > MAX_LABEL:
            raise ManifestError(f"--name={name!r} is too long: the operator names pods and "
                                f"services like {longest!r} ({len(longest)} characters), at "
                                f"most {MAX_LABEL}; shorten it by "
                                f"{len(longest) - MAX_LABEL}.")
    return name


def validate_image(image: str) -> str:
    """A container image reference: non-empty, no spaces or control characters."""
    if not image or not image.strip():
        raise ManifestError("--image is required: the container image holding t2t, e.g. "
                            "gcr.io/PROJECT/t2t:latest.")
    if any(c.isspace() or not c.isprintable() for c in image):
        raise ManifestError(f"--image={image!r}: an image reference has no spaces or control "
                            f"characters.")
    return image


def tfjob_manifest(name: str, image: str, command: Sequence[str], layout: Layout,
                   gpus_per_worker: int = 0, namespace: str | None = None,
                   restart_policy: str = "OnFailure") -> dict:
    """The TFJob manifest dict (see the module doc)."""
    validate_name(name, layout)
    validate_image(image)
    if namespace is not None:
        _check_label(namespace, "--namespace", first_letter=False)
    if not command or not all(isinstance(a, str) for a in command) or not command[0]:
        raise ManifestError("no command for the containers: give it after `--`, e.g. "
                            "-- t2t-trainer --problem=... --model=...")
    if isinstance(gpus_per_worker, bool) or not isinstance(gpus_per_worker, int) \
            or gpus_per_worker < 0:
        raise ManifestError(f"--gpus_per_worker must be an integer >= 0, got "
                            f"{gpus_per_worker!r}.")
    metadata = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    specs = {}
    for task_type, replicas in layout.counts().items():
        container = {"name": CONTAINER_NAME, "image": image, "command": list(command)}
        computes = task_type == WORKER or (task_type == CHIEF and not layout.num_ps)
        if gpus_per_worker and computes:
            container["resources"] = {"limits": {GPU_RESOURCE: gpus_per_worker}}
        specs[REPLICA_TYPES[task_type]] = {
            "replicas": replicas,
            "restartPolicy": restart_policy,
            "template": {"spec": {"containers": [container]}},
        }
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata,
            "spec": {"tfReplicaSpecs": specs}}


# --- serialization ----------------------------------------------------------------------

_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")
# Plain scalars YAML 1.1 reads as booleans or null.
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def yaml_string(text: str) -> str:
    """`text` as a YAML double-quoted scalar: printable ASCII as is, everything else
    escaped (\\", \\\\, \\uXXXX, \\UXXXXXXXX), so any string reads back unchanged."""
    out = ['"']
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif " " <= c <= "~":
            out.append(c)
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)


def _plain(text: str) -> bool:
    """Whether `text` can go unquoted: it starts with a letter (so it never reads as a
    number or a date), holds only letters, digits and `._/-`, and is no boolean/null."""
    return bool(_PLAIN.fullmatch(text)) and text.lower() not in _RESERVED


def _yaml_key(key: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"YAML keys here are strings, got {key!r}")
    return key if _plain(key) else yaml_string(key)


def _yaml_scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value if _plain(value) else yaml_string(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as YAML here")


def _yaml_lines(value, indent: int) -> list[str]:
    """Block-style lines of a non-empty dict or list, `indent` spaces in."""
    pad = " " * indent
    lines = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list | tuple) and item:
                lines.append(f"{pad}{_yaml_key(key)}:")
                lines.extend(_yaml_lines(item, indent + 2))
            else:
                lines.append(f"{pad}{_yaml_key(key)}: {_yaml_scalar(item)}")
        return lines
    for item in value:
        if isinstance(item, dict | list | tuple) and item:
            inner = _yaml_lines(item, indent + 2)
            lines.append(f"{pad}- {inner[0][indent + 2:]}")
            lines.extend(inner[1:])
        else:
            lines.append(f"{pad}- {_yaml_scalar(item)}")
    return lines


def to_yaml(manifest: dict, comment: str | None = None) -> str:
    """`manifest` as a YAML document (a leading `# comment` line when given)."""
    head = [f"# {line}".rstrip() for line in comment.splitlines()] if comment else []
    return "\n".join([*head, *_yaml_lines(manifest, 0)]) + "\n"


def to_json(manifest: dict) -> str:
    """`manifest` as indented JSON (kubectl apply -f takes JSON too)."""
    return json.dumps(manifest, indent=2) + "\n"
