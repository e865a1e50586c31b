"""Property-based fuzzing of t2t-serve's request parsers: TF Serving's REST predict body
(rest_api.parse_body / parse_predict) and KServe V2's infer body (v2_api.parse_infer),
against the SignatureSpecs of real traced signatures (string, int, float, bool inputs,
one and several inputs). Whatever the body, a parser returns a request whose arrays fit
the signature, or raises RequestError (a 4xx the server answers with): any other
exception would be a 500 for a client's mistake. The input checks (t2t.serving.
input_check) of a token vocabulary and of integer ids then pass or refuse (400) every
parsed request, and never crash either."""

from __future__ import annotations

import base64
import json
import math
import random

import pytest
import tensorflow as tf
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from t2t.serving import rest_api, v2_api
from t2t.serving.input_check import InputCheck
from t2t.serving.rest_api import RequestError, SignatureSpec

EXAMPLES = 700  # per test below; together >= 1,000 bodies
COUNT = {"rest": 0, "v2": 0, "bytes": 0}
# No explain phase: its line tracing (sys.settrace on Python 3.11) made each body ~100x
# slower to run.
PHASES = [Phase.explicit, Phase.generate, Phase.shrink]
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                phases=PHASES, suppress_health_check=list(HealthCheck))


def _spec(name, inputs, fn):
    concrete = tf.function(fn, input_signature=inputs).get_concrete_function()
    return SignatureSpec.from_function(name, concrete)


@pytest.fixture(scope="module")
def signatures():
    text = tf.TensorSpec([None], tf.string, name="inputs")
    ints = tf.TensorSpec([None, 3], tf.int64, name="ids")
    floats = tf.TensorSpec([None, 2], tf.float32, name="x")
    small = tf.TensorSpec([None], tf.int32, name="n")
    flags = tf.TensorSpec([None], tf.bool, name="on")
    grid = tf.TensorSpec([None, None, 2], tf.float64, name="grid")
    return {
        "serving_default": _spec("serving_default", [text], lambda inputs: {
            "outputs": inputs, "scores": tf.strings.length(inputs)}),
        "ids": _spec("ids", [ints], lambda ids: {"outputs": ids}),
        "scale": _spec("scale", [floats], lambda x: {"y": x * 2}),
        "mixed": _spec("mixed", [text, small, flags], lambda inputs, n, on: {
            "outputs": inputs}),
        "grid": _spec("grid", [grid], lambda grid: {"sum": tf.reduce_sum(grid)}),
    }


@pytest.fixture(scope="module")
def checks():
    """Input checks of a token vocabulary and of plain integer ids (as exports record)."""
    token = {"problem_hparams": {"modality": {"inputs": "symbol", "targets": "symbol"},
                                 "vocab_size": {"inputs": 4, "targets": 4}},
             "encoders": {"inputs": {"type": "token", "vocab": ["<pad>", "<EOS>", "0", "1"],
                                     "replace_oov": None, "reverse": False}}}
    ints = {"problem_hparams": {"modality": {"targets": "symbol"},
                                "vocab_size": {"targets": 12}},
            "encoders": {"targets": {"type": "text", "num_reserved_ids": 2}}}
    return [InputCheck.for_export(token), InputCheck.for_export(ints)]


# ----------------------------------------------------------------- bodies
# Bodies are built in plain Python from a seed that hypothesis draws: nested strategies
# (and st.randoms, which records every call) cost ~5-10 ms a body here, this ~0.1 ms, so
# that >= 1,000 bodies take a few seconds. note() shows the body of a failing example.
SCALARS = [None, True, False, 0, 1, -1, 2 ** 31, -(2 ** 31) - 1, 2 ** 63, -(2 ** 63) - 1,
           2 ** 64, 2 ** 70, -(2 ** 70), 1.5, 3.0, -0.0, 1e308, -1e308, 1e-320, 3.4e38,
           math.nan, math.inf, -math.inf, "", " ", "1 0 1", "1 2 3", "1011", "x y", "NaN",
           "inputs", "\ud800", "a\udfffb", "\u00e9\u65e5", "\x00", "1\u00a00", "-3 +2 007"]
NAMES = ["inputs", "ids", "x", "n", "on", "grid", "b64", "signature_name", "instances",
         "nope", ""]
SIGNATURE_NAMES = ["serving_default", "ids", "scale", "mixed", "grid", "serving_defaul",
                   None, 3, [], {"a": 1}]
DATATYPES = ["BYTES", "INT64", "INT32", "FP32", "FP64", "BOOL", "UINT8", "fp32", "", 7]


def _scalar(rng):
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(SCALARS)
    if roll < 0.7:
        return rng.randint(-(2 ** 70), 2 ** 70)
    if roll < 0.8:
        return rng.uniform(-1e6, 1e6)
    if roll < 0.9:
        return {"b64": base64.b64encode(rng.randbytes(rng.randint(0, 6))).decode()}
    return {"b64": rng.choice(["%%%", "", "AAA", "=", "\ud800", 5, None])}


def _value(rng, depth=0):
    """Any JSON value: scalars, lists and objects nested up to 4 deep."""
    roll = rng.random()
    if depth > 3 or roll < 0.5:
        return _scalar(rng)
    if roll < 0.85:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(NAMES): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _rectangular(rng):
    """Nested lists of one shape (1-3 dimensions of 1-3) of one kind of leaf: the
    well-formed values, which the parser must turn into arrays or refuse by dtype."""
    kind = rng.choice(["text", "int", "float", "bool", "any"])
    dims = [rng.randint(1, 3) for _ in range(rng.randint(1, 3))]

    def leaf():
        if kind == "text":
            return rng.choice(["1 0 1", "1 2", "", "x", {"b64": "MSAw"}])
        if kind == "int":
            return rng.choice([0, 1, 7, -2, 2 ** 40, 2 ** 64])
        if kind == "float":
            return rng.choice([0.5, 1.0, -2.25, 1e39, math.nan, 4])
        return rng.choice([True, False]) if kind == "bool" else _scalar(rng)

    def build(level):
        return ([build(level + 1) for _ in range(dims[level])] if level < len(dims)
                else leaf())

    return build(0)


def _input_value(rng):
    roll = rng.random()
    if roll < 0.5:
        return _rectangular(rng)
    if roll < 0.75:
        return _value(rng)
    return {rng.choice(NAMES): (_rectangular(rng) if rng.random() < 0.7 else _value(rng))
            for _ in range(rng.randint(0, 3))}


def rest_body(rng):
    """A predict body: row or columnar, bare or named inputs, mostly almost valid."""
    body = {}
    name = rng.choice(SIGNATURE_NAMES)
    if name is not None:
        body["signature_name"] = name
    field = rng.choice(["instances", "inputs", "instances", "inputs", "both", "neither"])
    value = _input_value(rng)
    if field in ("instances", "both"):
        body["instances"] = value
    if field in ("inputs", "both"):
        body["inputs"] = value
    if rng.random() < 0.1:
        body[rng.choice(NAMES)] = _value(rng, 2)
    return body


def v2_body(rng):
    """A V2 infer body: a list of {"name", "shape", "datatype", "data"} tensors."""
    def tensor():
        item = {"name": rng.choice(NAMES),
                "shape": ([rng.randint(-2, 4) for _ in range(rng.randint(0, 3))]
                          if rng.random() < 0.8 else _value(rng, 2)),
                "datatype": rng.choice(DATATYPES), "data": _input_value(rng)}
        if rng.random() < 0.1:
            item["parameters"] = _value(rng, 2)
        return item

    inputs = [tensor() for _ in range(rng.randint(0, 3))]
    body = {"inputs": inputs if rng.random() < 0.9 else _value(rng, 1)}
    if rng.random() < 0.5:
        body["parameters"] = {"signature_name": rng.choice(SIGNATURE_NAMES)}
    if rng.random() < 0.3:
        body["outputs"] = [{"name": rng.choice(NAMES + ["outputs", "y"])}
                           for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.3:
        body["id"] = _scalar(rng)
    return body


def _encode(body, how):
    """The body as bytes a client might send: JSON (NaN as a token, lone surrogates as
    escapes or as raw invalid UTF-8), cut short, or wrapped in something else."""
    text = json.dumps(body, allow_nan=True, ensure_ascii=how != "raw")
    data = text.encode("utf-8", "surrogatepass")
    if how == "cut":
        return data[: max(0, len(data) // 2)]
    if how == "list":
        return b"[" + data + b"]"
    return data


# ----------------------------------------------------------------- properties
def _check_parsed(request, spec_names, checks):
    """The arrays of a parsed request fit its signature; the input checks only refuse."""
    assert request.signature.name in spec_names
    assert request.batch_size >= 1
    for name, array in request.inputs.items():
        info = request.signature.inputs[name]
        assert array.dtype == info.numpy_dtype
        assert array.ndim == len(info.shape) and len(array) == request.batch_size
        for want, got in zip(info.shape, array.shape, strict=True):
            assert want is None or want == got
    for check in checks:
        try:
            check.check(request)
        except RequestError as e:
            assert e.status == 400 and str(e)


@FUZZ
@given(seed=st.integers(0, 2 ** 64),
       how=st.sampled_from(["ascii", "raw", "cut", "list", "dict"]))
def test_rest_predict_parser_only_raises_request_errors(signatures, checks, seed, how):
    COUNT["rest"] += 1
    body = rest_body(random.Random(seed))
    note(f"body: {body!r}")
    payload = body if how == "dict" else _encode(body, how)
    try:
        request = rest_api.parse_predict(payload, signatures, max_batch_size=8)
    except RequestError as e:
        assert e.status in (400, 413) and str(e)
        return
    _check_parsed(request, set(signatures), checks)


@FUZZ
@given(seed=st.integers(0, 2 ** 64), how=st.sampled_from(["ascii", "raw", "cut", "dict"]))
def test_v2_infer_parser_only_raises_request_errors(signatures, checks, seed, how):
    COUNT["v2"] += 1
    body = v2_body(random.Random(seed))
    note(f"body: {body!r}")
    payload = body if how == "dict" else _encode(body, how)
    try:
        request = v2_api.parse_infer(payload, signatures, max_batch_size=8)
    except RequestError as e:
        assert e.status in (400, 413) and str(e)
        return
    _check_parsed(request.predict, set(signatures), checks)


@settings(max_examples=300, deadline=None, derandomize=True, database=None, phases=PHASES)
@given(data=st.binary(max_size=64) | st.sampled_from(
    [b"", b"{", b"nul", b"\xff\xfe{}", b"[" * 5000 + b"]" * 5000, b'{"instances": ' + b"[" * 5000,
     b'{"inputs": "\\ud800"}', b"\xef\xbb\xbf{}", b"NaN", b'{"instances": [Infinity]}']))
def test_parsers_refuse_arbitrary_bytes(signatures, data):
    COUNT["bytes"] += 1
    for parse in (rest_api.parse_predict, v2_api.parse_infer):
        try:
            parse(data, signatures)
        except RequestError as e:
            assert e.status == 400 and str(e)


def test_a_deep_nesting_is_a_request_error(signatures):
    body = b'{"instances": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(RequestError, match="nest"):
        rest_api.parse_predict(body, signatures)
    nested: list = []
    for _ in range(3000):  # deeper than Python's recursion limit, built without JSON
        nested = [nested]
    with pytest.raises(RequestError):
        rest_api.parse_predict({"instances": nested}, signatures)


def test_what_the_fuzzing_found_is_named(signatures):
    with pytest.raises(RequestError, match="not valid Unicode"):
        rest_api.parse_predict(b'{"instances": ["a\\ud800b"]}', signatures)
    with pytest.raises(RequestError, match="wants int64"):
        rest_api.parse_predict({"signature_name": "ids", "instances": [[1, 2, math.nan]]},
                               signatures)
    with pytest.raises(RequestError, match="int64"):
        rest_api.parse_predict({"signature_name": "ids", "instances": [[1, 2, 2 ** 64]]},
                               signatures)
    with pytest.raises(RequestError, match="outside float32's range"):
        rest_api.parse_predict({"signature_name": "scale", "instances": [[1e39, 1.0]]},
                               signatures)
    with pytest.raises(RequestError, match="\"signature_name\" must be a string, got list"):
        rest_api.parse_predict({"signature_name": [], "instances": ["1 0"]}, signatures)


def test_the_fuzzing_ran_enough_inputs():
    """Run after the property tests (same module, same worker): >= 1,000 bodies."""
    if not all(COUNT.values()):
        pytest.skip("run together with the property tests")
    assert sum(COUNT.values()) >= 1000, COUNT
    assert all(count >= 300 for count in COUNT.values()), COUNT
