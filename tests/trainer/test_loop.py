"""The training loop's stopping rules: NaN losses, lost cluster peers, an action's reason."""

import pytest
import tensorflow as tf

from t2t.trainer import loop as loop_lib
from t2t.trainer import profiling


class _Hooks:
    """Stands in for the strategy hooks: every step fails as a lost peer would."""

    parameter_server = False

    def last_step(self, step, target, every):
        return step + 1

    def run_steps(self, *args):
        raise tf.errors.UnavailableError(None, None, "Socket closed\nmore detail")


class _Checkpoints:
    latest = "/run/ckpt-20"

    class manager:  # noqa: N801 (stands in for a tf.train.CheckpointManager)
        latest_checkpoint = "/run/ckpt-20"


def _loop(in_cluster):
    loop = loop_lib.TrainingLoop.__new__(loop_lib.TrainingLoop)
    loop.hooks, loop.checkpoints, loop.in_cluster = _Hooks(), _Checkpoints(), in_cluster
    loop.config = type("Config", (), {"log_every_steps": 10, "save_checkpoints_steps": 10,
                                      "local_eval_frequency": 10})()
    loop.stop_requested, loop.train_step, loop.iterator = False, None, None
    loop.profiler = profiling.StepProfiler(None, "/unused")
    loop.optimizer = type("Optimizer", (), {"iterations": tf.Variable(20, dtype=tf.int64)})()
    loop.task = type("Task", (), {"divergence_hint": lambda self: " HINT."})()
    return loop


def test_a_lost_peer_ends_a_cluster_run_saying_how_to_resume():
    with pytest.raises(loop_lib.ClusterError, match="another process of the cluster") as error:
        _loop(in_cluster=True)._run_steps(100)
    message = str(error.value)
    assert "at step 20" in message and "UnavailableError: Socket closed" in message
    assert "/run/ckpt-20" in message and "re-run the same launch command" in message
    with pytest.raises(tf.errors.UnavailableError):  # alone, the error is TensorFlow's own
        _loop(in_cluster=False)._run_steps(100)


def test_a_non_finite_loss_stops_naming_the_kept_checkpoint():
    with pytest.raises(loop_lib.NonFiniteLossError, match="became nan at step 21") as error:
        _loop(in_cluster=False)._check_finite(21, float("nan"))
    assert "/run/ckpt-20" in str(error.value) and "clip_grad_norm" in str(error.value)
    assert str(error.value).endswith("float32. HINT.")  # the task's own advice follows
    _loop(in_cluster=False)._check_finite(21, 0.5)  # finite: nothing happens


def test_the_first_reason_to_stop_is_the_one_kept():
    loop = _loop(in_cluster=False)
    loop.stop_reason = ""
    loop.request_stop("Early stopping at step 20: loss has not decreased.")
    loop.request_stop("Another action's reason.")
    assert loop.stop_requested and loop.stop_reason.startswith("Early stopping at step 20")
