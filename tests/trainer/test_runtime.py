"""Runtime start-up: the strategy, seeds and what the input pipeline inherits."""

import dataclasses

import pytest
import tensorflow as tf

from t2t.config import InputConfig, RuntimeConfig
from t2t.trainer import runtime as runtime_lib


def test_start_returns_the_strategy_and_the_seed_and_edits_nothing():
    config = RuntimeConfig(random_seed=3)
    before = dataclasses.asdict(config)
    runtime = runtime_lib.start(config)
    assert runtime.seed == 3 and runtime.num_replicas == 1 and runtime.is_chief
    assert runtime.task == (None, 0)
    assert dataclasses.asdict(config) == before
    # Not deterministic: the input pipeline's own settings are kept.
    assert runtime.input_config(InputConfig(seed=9)) == InputConfig(seed=9)


def test_deterministic_runtime_makes_the_input_ordered_and_seeded():
    runtime = runtime_lib.Runtime(RuntimeConfig(deterministic=True), tf.distribute.get_strategy(),
                                  seed=runtime_lib.DETERMINISTIC_DEFAULT_SEED)
    base = InputConfig(shuffle_buffer_size=7)
    derived = runtime.input_config(base)
    assert (derived.deterministic, derived.seed, derived.shuffle_buffer_size) == (True, 1, 7)
    assert base.deterministic is False  # the config passed in is not edited


def test_a_mesh_across_processes_reads_the_same_batches_in_every_process(monkeypatch):
    """Two clients of one mesh that read different batches (other shapes) wait for each
    other forever: their input is ordered and seeded even without --deterministic."""
    from tensorflow.experimental import dtensor

    monkeypatch.setattr(dtensor, "num_clients", lambda: 2)
    monkeypatch.setattr(dtensor, "client_id", lambda: 1)
    runtime = runtime_lib.Runtime(RuntimeConfig(), tf.distribute.get_strategy(), seed=1,
                                  mesh=object())
    assert runtime.task == ("worker", 1) and not runtime.is_chief
    derived = runtime.input_config(InputConfig(seed=9, shuffle_buffer_size=7))
    assert (derived.deterministic, derived.seed, derived.shuffle_buffer_size) == (True, 1, 7)
    # One process's mesh reads as asked.
    monkeypatch.setattr(dtensor, "num_clients", lambda: 1)
    assert runtime.input_config(InputConfig(seed=9)) == InputConfig(seed=9)


def test_bad_precision_is_refused_before_anything_starts():
    with pytest.raises(ValueError, match="mixed_precision='int8': use bfloat16 or float16"):
        runtime_lib.check(RuntimeConfig(mixed_precision="int8"))


class _FakeGPU:
    def __init__(self, index):
        self.name, self.device_type = f"/physical_device:GPU:{index}", "GPU"


@pytest.fixture
def gpu_calls(monkeypatch):
    """Records the memory settings configure_gpus applies (this machine has no GPU)."""
    calls = {"growth": {}, "logical": {}}
    monkeypatch.setattr(tf.config.experimental, "get_memory_growth",
                        lambda gpu: calls["growth"].get(gpu.name, False))
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth",
                        lambda gpu, on: calls["growth"].__setitem__(gpu.name, on))
    monkeypatch.setattr(tf.config, "get_logical_device_configuration",
                        lambda gpu: calls["logical"].get(gpu.name))
    monkeypatch.setattr(tf.config, "set_logical_device_configuration",
                        lambda gpu, configs: calls["logical"].__setitem__(gpu.name, configs))
    return calls


def test_memory_growth_is_set_on_every_gpu(gpu_calls):
    gpus = [_FakeGPU(0), _FakeGPU(1)]
    message = runtime_lib.configure_gpus(True, 0, gpus=gpus)
    assert gpu_calls["growth"] == {g.name: True for g in gpus} and not gpu_calls["logical"]
    assert message == "GPUs GPU:0, GPU:1: memory growth on."
    message = runtime_lib.configure_gpus(False, 0, gpus=gpus)
    assert set(gpu_calls["growth"].values()) == {False} and "off (all memory)" in message


def test_a_memory_limit_replaces_growth_and_is_applied_once(gpu_calls, monkeypatch):
    gpus = [_FakeGPU(0)]
    message = runtime_lib.configure_gpus(True, 2048, gpus=gpus)
    assert [c.memory_limit for c in gpu_calls["logical"]["/physical_device:GPU:0"]] == [2048]
    assert not gpu_calls["growth"] and message == "GPUs GPU:0: at most 2048 MiB each."

    def initialized(gpu, configs):
        raise RuntimeError("Virtual devices cannot be modified after being initialized")

    monkeypatch.setattr(tf.config, "set_logical_device_configuration", initialized)
    runtime_lib.configure_gpus(True, 2048, gpus=gpus)  # the same limit: nothing to do
    with pytest.raises(runtime_lib.DeviceSettingsError, match="before TensorFlow first uses"):
        runtime_lib.configure_gpus(True, 1024, gpus=gpus)


def test_gpu_settings_without_a_gpu_say_so():
    assert runtime_lib.configure_gpus(True, 0, gpus=[]) == (
        "No GPU visible: --gpu_memory_growth does not apply (training on the CPU).")
    assert "--gpu_memory_limit_mb=512 does not apply" in runtime_lib.configure_gpus(
        True, 512, gpus=[])
    assert "No GPU visible" in runtime_lib.configure_gpus(True, 0)  # this machine, for real
    with pytest.raises(ValueError, match="gpu_memory_limit_mb=-1"):
        runtime_lib.configure_gpus(True, -1, gpus=[])
