"""The parity gate's serving side runs with TensorFlow alone, never t2t."""

import json
import subprocess
import sys

import tensorflow as tf

from t2t.serving import parity_worker


def test_run_by_path_it_serves_a_saved_model_without_importing_t2t(tmp_path):
    module = tf.Module()
    module.scale = tf.Variable(2, dtype=tf.int64)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        parsed = tf.io.parse_example(examples, {"inputs": tf.io.RaggedFeature(tf.int64)})
        ids = parsed["inputs"].to_tensor(0) * module.scale
        return {"outputs": ids, "scores": tf.reduce_sum(tf.cast(ids, tf.float32), axis=1)}

    tf.saved_model.save(module, str(tmp_path / "model"),
                        signatures={"serve_tf_example": serve.get_concrete_function()})
    request = {"export_dir": str(tmp_path / "model"), "needs_tensorflow_text": False,
               "text_signature": False, "text_batches": [],
               "example_batches": [[{"ids": [3, 4, 1]}, {"ids": [5, 1]}]]}
    (tmp_path / "request.json").write_text(json.dumps(request))
    result = subprocess.run([sys.executable, parity_worker.__file__, str(tmp_path / "request.json"),
                             str(tmp_path / "result.json")], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads((tmp_path / "result.json").read_text())
    assert served["t2t_modules"] == []
    assert served["examples"] == [{"outputs": [[6, 8, 2], [10, 2, 0]], "scores": [16.0, 12.0]}]


def test_usage_error_without_both_paths():
    result = subprocess.run([sys.executable, parity_worker.__file__], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "usage: parity_worker.py" in result.stderr


def test_outputs_become_json_values():
    out = parity_worker.to_lists({"outputs": tf.constant([b"a", b"\xffb"]),
                                  "beams": tf.constant([[b"x", b"y"]]),
                                  "scores": tf.constant([0.5, 1.0])})
    assert out == {"outputs": ["a", "\ufffdb"], "beams": [["x", "y"]], "scores": [0.5, 1.0]}
