"""TF Serving's REST request/response format: parsing, every refusal, and the replies."""

import base64
import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from t2t.serving import rest_api
from t2t.serving.rest_api import RequestError, SignatureSpec, TensorInfo

TEXT = SignatureSpec("serving_default", {"inputs": TensorInfo("string", (None,))},
                     {"outputs": TensorInfo("string", (None,)),
                      "scores": TensorInfo("float32", (None,))})
PAIR = SignatureSpec("pair", {"ids": TensorInfo("int64", (None, 3)),
                              "mask": TensorInfo("bool", (None, 3))},
                     {"y": TensorInfo("float32", (None,))})
SIGS = {"serving_default": TEXT, "pair": PAIR}


def _parse(body, **kw):
    return rest_api.parse_predict(json.dumps(body).encode(), SIGS, **kw)


def test_row_format_bare_values_and_b64():
    raw = b"\xff\x00png"
    request = _parse({"instances": ["1 0 1", {"b64": base64.b64encode(raw).decode()}]})
    assert request.row_format and request.batch_size == 2 and request.signature is TEXT
    assert request.inputs["inputs"].tolist() == [b"1 0 1", raw]


def test_row_format_named_inputs_and_columnar_format():
    row = _parse({"signature_name": "pair", "instances": [
        {"ids": [1, 2, 3], "mask": [True, False, True]},
        {"ids": [4, 5, 6], "mask": [True, True, True]}]})
    assert row.inputs["ids"].dtype == np.int64 and row.inputs["ids"].shape == (2, 3)
    assert row.inputs["mask"].dtype == bool
    col = _parse({"signature_name": "pair", "inputs": {"ids": [[1, 2, 3]],
                                                      "mask": [[True, True, False]]}})
    assert not col.row_format and col.batch_size == 1
    assert col.inputs["ids"].tolist() == [[1, 2, 3]]
    assert _parse({"inputs": ["a", "b", "c"]}).batch_size == 3


@pytest.mark.parametrize("body,status,words", [
    ({"instances": []}, 400, "empty"),
    ({"inputs": []}, 400, "empty"),
    ({"instances": "abc"}, 400, "must be a list"),
    ({"instances": ["a"], "inputs": ["a"]}, 400, "exactly one"),
    ({}, 400, "exactly one"),
    ({"instances": ["a"], "extra": 1}, 400, "unknown request field"),
    ({"signature_name": "nope", "instances": ["a"]}, 400, "unknown signature_name 'nope'"),
    ({"instances": [{"input": "a"}]}, 400, "unknown input name(s) ['input']"),
    ({"instances": [3]}, 400, "wants a string"),
    ({"instances": [{"b64": "%%%"}]}, 400, "invalid base64"),
    ({"signature_name": "pair", "instances": [{"ids": [1, 2, 3]}]}, 400, "missing input(s) ['mask']"),
    ({"signature_name": "pair", "instances": [{"ids": [1, 2.5, 3], "mask": [1, 1, 1]}]}, 400,
     "wants int64, got float 2.5"),
    ({"signature_name": "pair", "instances": [{"ids": ["1", 2, 3], "mask": [True] * 3}]}, 400,
     "wants int64, got str"),
    ({"signature_name": "pair", "instances": [{"ids": [1, 2, 3], "mask": [1, 0, 1]}]}, 400,
     "wants bool"),
    ({"signature_name": "pair", "instances": [{"ids": [1, 2], "mask": [True, True]}]}, 400,
     "wants shape [3]"),
    ({"signature_name": "pair", "instances": [{"ids": [[1, 2], [3]], "mask": [True] * 3}]}, 400,
     "ids"),
    ({"signature_name": "pair", "inputs": {"ids": [[1, 2, 3]], "mask": [[True] * 3] * 2}}, 400,
     "different batch sizes"),
    ({"signature_name": "pair", "instances": [1, 2]}, 400, "each instance must be an object"),
    ({"instances": ["a"] * 5}, 413, "at most 4 (t2t-serve --max_batch_size)"),
])
def test_refusals_name_the_problem(body, status, words):
    with pytest.raises(RequestError) as e:
        _parse(body, max_batch_size=4)
    assert e.value.status == status
    assert words in str(e.value)


@pytest.mark.parametrize("body,words", [
    (b'{"instances": [', "malformed JSON"),
    (b"\xff\xfe", "not UTF-8 JSON"),
    (b"[1, 2]", "must be a JSON object"),
])
def test_bodies_that_are_not_json_objects(body, words):
    with pytest.raises(RequestError) as e:
        rest_api.parse_predict(body, SIGS)
    assert words in str(e.value) and e.value.status == 400


def test_responses_row_and_columnar_with_non_utf8_and_nan():
    outputs = {"outputs": np.array([b"ok", b"\xff"], dtype=object),
               "scores": np.array([0.5, np.nan], np.float32)}
    row = rest_api.predict_response(outputs, row_format=True)
    assert row == {"predictions": [{"outputs": "ok", "scores": 0.5},
                                   {"outputs": {"b64": base64.b64encode(b"\xff").decode()},
                                    "scores": "NaN"}]}
    col = rest_api.predict_response(outputs, row_format=False)
    assert col["outputs"]["scores"] == [0.5, "NaN"]
    single = rest_api.predict_response({"y": np.array([[1, 2]], np.int64)}, row_format=True)
    assert single == {"predictions": [[1, 2]]}
    assert rest_api.predict_response({"y": np.array([1.0])}, False) == {"outputs": [1.0]}
    json.dumps(row, allow_nan=False)  # valid strict JSON


def test_signature_def_json_uses_tensorflow_dtype_names():
    sig = rest_api.signature_def_json(TEXT)
    assert sig["inputs"]["inputs"]["dtype"] == "DT_STRING"
    assert sig["outputs"]["scores"]["dtype"] == "DT_FLOAT"
    assert sig["inputs"]["inputs"]["tensor_shape"]["dim"] == [{"size": "-1", "name": ""}]


# ------------------------------------------------------------ scalar inputs
GENERATE = SignatureSpec("generate", {"inputs": TensorInfo("string", (None,)),
                                      "temperature": TensorInfo("float32", ()),
                                      "top_k": TensorInfo("int32", ())},
                         {"outputs": TensorInfo("string", (None,))})
SCALARS = {"generate": GENERATE, "knob": SignatureSpec(
    "knob", {"k": TensorInfo("int64", ())}, {"y": TensorInfo("int64", ())})}


def test_scalar_inputs_take_a_bare_value_in_the_columnar_format():
    request = rest_api.parse_predict(json.dumps({"signature_name": "generate", "inputs": {
        "inputs": ["a", "b"], "temperature": 0.8, "top_k": 20}}).encode(), SCALARS)
    assert request.batch_size == 2 and request.inputs["temperature"].shape == ()
    assert request.inputs["temperature"].dtype == np.float32
    assert request.inputs["top_k"].item() == 20
    only = rest_api.parse_predict(json.dumps({"signature_name": "knob", "inputs": {"k": 3}})
                                  .encode(), SCALARS)
    assert only.batch_size == 1 and only.inputs["k"].item() == 3
    assert GENERATE.scalar_inputs == ["temperature", "top_k"]


@pytest.mark.parametrize("body, words", [
    ({"inputs": {"inputs": ["a"], "temperature": [0.8], "top_k": 2}},
     "inputs['temperature']: a scalar input (shape []) takes one bare float32 value, got shape "
     "[1]; send e.g. 0.5, not a list"),
    ({"inputs": {"inputs": ["a"], "temperature": 0.8, "top_k": 2.5}},
     "inputs['top_k']: wants int32, got float 2.5"),
    ({"inputs": {"inputs": ["a"], "temperature": "hot", "top_k": 2}},
     "inputs['temperature']: wants float32, got str"),
    ({"inputs": {"inputs": [], "temperature": 0.8, "top_k": 2}}, "\"inputs\" is empty"),
    ({"instances": [{"inputs": "a", "temperature": 0.8, "top_k": 2}]},
     "signature 'generate' has scalar input(s) ['temperature', 'top_k'] (shape [], one value "
     "per request), which the row format (\"instances\") cannot send: use the columnar format "
     "{\"signature_name\": \"generate\", \"inputs\": {\"inputs\": [...], \"temperature\": 0.5, "
     "\"top_k\": 7}}"),
])
def test_bad_scalars_name_the_input_and_the_fix(body, words):
    with pytest.raises(RequestError) as e:
        rest_api.parse_predict(json.dumps({"signature_name": "generate", **body}).encode(),
                               SCALARS)
    assert e.value.status == 400 and words in str(e.value)


def test_scalar_outputs_answer_the_columnar_format_only():
    assert rest_api.predict_response({"y": np.array(6, np.int64)}, False) == {"outputs": 6}
    with pytest.raises(RequestError, match=r"output\(s\) \['y'\] .* are scalars"):
        rest_api.predict_response({"y": np.array(6, np.int64), "z": np.array([1])}, True)


def test_requests_share_a_batch_only_with_equal_scalars():
    """Equal settings batch together (one model call, the settings once); different ones,
    and a random seed (-1), run in their own batches."""
    import asyncio

    from t2t.serving.batching import Batcher, BatchingOptions

    calls = []

    def run(inputs):
        calls.append((inputs["t"].item(), inputs["seed"].item(), len(inputs["x"])))
        return {"y": inputs["x"] * inputs["t"]}

    async def main():
        batcher = Batcher(run, BatchingOptions(max_batch_size=8, batch_timeout_micros=200_000,
                                               num_batch_threads=1), ThreadPoolExecutor(1))
        requests = [(2.0, 5, [1.0]), (3.0, 5, [1.0, 2.0]), (2.0, 5, [4.0, 5.0]), (2.0, -1, [7.0]),
                    (2.0, -1, [8.0])]
        answers = await asyncio.gather(*[batcher.predict(
            {"x": np.array(x, np.float32), "t": np.array(t, np.float32),
             "seed": np.array(seed, np.int64)}, len(x)) for t, seed, x in requests])
        await batcher.close()
        return [a["y"].tolist() for a in answers], batcher.stats

    answers, stats = asyncio.run(main())
    assert answers == [[2.0], [3.0, 6.0], [8.0, 10.0], [14.0], [16.0]]
    # 1 + 2 examples with t=2, seed=5 in one call, padded to the batch size 4
    assert sorted(calls) == [(2.0, -1, 1), (2.0, -1, 1), (2.0, 5, 4), (3.0, 5, 2)]
    assert (stats.requests, stats.batches, stats.examples, stats.padding) == (5, 4, 7, 1)
