"""Tests of t2t.trainer.optimizers: hparams mapping, steps, clipping, weight decay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t.hparams.basic import basic_params1
from t2t.trainer import optimizers


def _hp(**overrides):
    hp = basic_params1()
    for name, value in overrides.items():
        setattr(hp, name, value)
    return hp


def test_adam_gets_hparams():
    hp = _hp(optimizer_adam_beta1=0.9, optimizer_adam_beta2=0.98, optimizer_adam_epsilon=1e-9)
    opt = optimizers.create_optimizer(hp, 0.5)
    assert type(opt) is keras.optimizers.Adam
    assert (opt.beta_1, opt.beta_2, opt.epsilon) == (0.9, 0.98, 1e-9)
    assert float(opt.learning_rate) == 0.5
    assert opt.global_clipnorm is None and opt.weight_decay is None  # done by t2t instead


def test_names_are_case_insensitive_and_aliased():
    for name, cls in [
        ("Adam", keras.optimizers.Adam),
        ("true_adam", keras.optimizers.Adam),
        ("SGD", keras.optimizers.SGD),
        ("Momentum", keras.optimizers.SGD),
        ("Adafactor", optimizers.Adafactor),
        ("adam_w", keras.optimizers.AdamW),
    ]:
        assert type(optimizers.create_optimizer(_hp(optimizer=name), 0.1)) is cls, name


def test_unknown_optimizer_names_choices():
    with pytest.raises(ValueError, match="'yellow_fin'") as err:
        optimizers.create_optimizer(_hp(optimizer="yellow_fin"), 0.1)
    for name in optimizers.OPTIMIZERS:
        assert name in str(err.value)


def test_sgd_and_momentum_params():
    sgd = optimizers.create_optimizer(_hp(optimizer="sgd"), 0.1)
    assert sgd.momentum == 0.0 and not sgd.nesterov
    hp = _hp(
        optimizer="momentum", optimizer_momentum_momentum=0.8, optimizer_momentum_nesterov=True
    )
    mom = optimizers.create_optimizer(hp, 0.1)
    assert mom.momentum == 0.8 and mom.nesterov


def test_adafactor_and_adamw_params():
    hp = _hp(
        optimizer="adafactor",
        optimizer_adafactor_beta1=0.5,
        optimizer_adafactor_decay_type="adam",
        optimizer_adafactor_beta2=0.99,
        optimizer_adafactor_memory_exponent=0.7,
        optimizer_adafactor_clipping_threshold=2.0,
        optimizer_adafactor_factored=False,
        optimizer_adafactor_multiply_by_parameter_scale=False,
    )
    opt = optimizers.create_optimizer(hp, 0.1)
    assert (opt.beta_1, opt.beta_2, opt.decay_type) == (0.5, 0.99, "adam")
    assert (opt.beta_2_decay, opt.clip_threshold) == (-0.7, 2.0)
    assert not opt.factored and not opt.multiply_by_parameter_scale
    config = opt.get_config()
    assert config["factored"] is False and config["decay_type"] == "adam"
    adamw = optimizers.create_optimizer(_hp(optimizer="adamw", weight_decay=0.01), 0.1)
    assert adamw.weight_decay == 0.01


@pytest.mark.parametrize("name", ["adam", "adamw", "sgd", "momentum", "adafactor"])
def test_steps_reduce_a_quadratic(name):
    target = np.arange(12, dtype=np.float32).reshape(4, 3) / 4.0
    kernel = keras.Variable(np.ones((4, 3), np.float32), name="kernel")
    bias = keras.Variable(np.ones(3, np.float32), name="bias")
    # Adafactor's step is relative to the parameters' RMS: it takes a larger rate.
    opt = optimizers.create_optimizer(_hp(optimizer=name), 0.3 if name == "adafactor" else 0.05)
    opt.build([kernel, bias])

    def loss_fn():
        return tf.reduce_sum(tf.square(kernel - target)) + tf.reduce_sum(tf.square(bias))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn()
        grads = tape.gradient(loss, [kernel, bias])
        opt.apply_gradients(zip(grads, [kernel, bias], strict=True))
        return loss

    first = float(step())
    for _ in range(9):
        step()
    assert float(loss_fn()) < 0.9 * first, name
    assert int(opt.iterations.numpy()) == 10


def _t2t_adafactor(w, grads, lr, *, beta1, decay_type, beta2, exponent, clip, factored, scale):
    """NumPy transcription of Tensor2Tensor's AdafactorOptimizer._resource_apply_dense."""

    def rms(x):
        return np.sqrt(np.mean(np.square(x)))

    vr = np.zeros(w.shape[:-1])
    vc = np.zeros(w.shape[:-2] + w.shape[-1:])  # noqa: E702
    v = np.zeros(w.shape)
    m = np.zeros(w.shape)  # noqa: E702
    w = w.astype(np.float64)
    for step, g in enumerate(grads):
        t = step + 1.0
        if decay_type == "adam":
            decay = beta2 * (1 - beta2 ** (t - 1)) / (1 - beta2**t)
        else:
            decay = 1 - t**-exponent
        g2 = g * g + 1e-30
        if factored:
            vr = decay * vr + (1 - decay) * g2.mean(-1)
            vc = decay * vc + (1 - decay) * g2.mean(-2)
            r = 1 / np.sqrt(vr / vr.mean(-1, keepdims=True))
            x = g * r[..., None] * (1 / np.sqrt(vc))[..., None, :]
        else:
            v = decay * v + (1 - decay) * g2
            x = g / np.sqrt(v)
        if clip:
            x = x / max(1.0, rms(x) / clip)
        sub = lr * (max(rms(w), 1e-3) if scale else 1.0) * x
        if beta1:
            m = beta1 * m + (1 - beta1) * sub
            sub = m
        w = w - sub
    return w


@pytest.mark.parametrize(
    "kw",
    [
        dict(
            beta1=0.0,
            decay_type="pow",
            beta2=0.999,
            exponent=0.8,
            clip=1.0,
            factored=True,
            scale=True,
        ),
        dict(
            beta1=0.9,
            decay_type="adam",
            beta2=0.99,
            exponent=0.8,
            clip=None,
            factored=False,
            scale=False,
        ),
    ],
)
def test_adafactor_matches_tensor2tensor(kw):
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(3, 5)).astype(np.float32)
    grads = [rng.normal(size=(3, 5)).astype(np.float32) for _ in range(4)]
    opt = optimizers.Adafactor(
        learning_rate=0.1,
        beta_1=kw["beta1"],
        beta_2=kw["beta2"],
        decay_type=kw["decay_type"],
        beta_2_decay=-kw["exponent"],
        clip_threshold=kw["clip"],
        factored=kw["factored"],
        multiply_by_parameter_scale=kw["scale"],
    )
    var = keras.Variable(w0)
    opt.build([var])
    for g in grads:
        opt.apply_gradients([(tf.constant(g), var)])
    expected = _t2t_adafactor(w0, grads, 0.1, **kw)
    np.testing.assert_allclose(var.numpy(), expected, rtol=2e-5, atol=1e-6)
    # Factored slots are a row and a column, not a full-size second moment.
    slot_sizes = sorted(int(np.prod(v.shape)) for v in opt.variables[2:])  # skip iterations, lr
    assert slot_sizes == ([3, 5] if kw["factored"] else [15, 15])


# ------------------------------------------------------------------------- clipping
def test_clip_gradients_bounds_the_update():
    var = keras.Variable(np.zeros(4, np.float32))
    opt = optimizers.create_optimizer(_hp(optimizer="sgd"), 1.0)
    grads = [tf.constant([6.0, 8.0, 0.0, 0.0]), None]
    clipped, norm = optimizers.clip_gradients(grads, 2.0)
    assert float(norm) == pytest.approx(10.0) and clipped[1] is None
    opt.apply_gradients([(clipped[0], var)])
    np.testing.assert_allclose(var.numpy(), [-1.2, -1.6, 0.0, 0.0], rtol=1e-6)
    assert float(tf.norm(var)) == pytest.approx(2.0)
    same, norm = optimizers.clip_gradients(grads, 0.0)  # 0 disables, norm still reported
    assert same[0] is grads[0] and float(norm) == pytest.approx(10.0)
    small, _ = optimizers.clip_gradients([tf.constant([0.3, 0.4])], 2.0)
    np.testing.assert_allclose(small[0].numpy(), [0.3, 0.4], rtol=1e-6)


def test_clip_gradients_with_loss_scale():
    hp = _hp(optimizer="sgd")
    opt = optimizers.create_optimizer(hp, 1.0, mixed_precision="float16")
    assert isinstance(opt, keras.optimizers.LossScaleOptimizer)
    var = keras.Variable(np.zeros(2, np.float32))
    opt.build([var])
    scale = float(opt.dynamic_scale.numpy())
    assert scale == 2.0**15
    scaled = [tf.constant([3.0, 4.0]) * scale]  # gradients of the scaled loss
    clipped, norm = optimizers.clip_gradients(scaled, 1.0, loss_scale=opt.dynamic_scale)
    assert float(norm) == pytest.approx(5.0)
    opt.apply_gradients([(clipped[0], var)])
    np.testing.assert_allclose(var.numpy(), [-0.6, -0.8], rtol=1e-5)


def test_mixed_precision_choices():
    hp = _hp()
    assert type(optimizers.create_optimizer(hp, 0.1, mixed_precision="mixed_bfloat16")) is (
        keras.optimizers.Adam
    )
    with pytest.raises(ValueError, match="int8"):
        optimizers.create_optimizer(hp, 0.1, mixed_precision="int8")


# --------------------------------------------------------------------- weight decay
def test_weight_decay_loss_is_t2t_l2():
    kernel = keras.Variable(np.full((2, 3), 2.0, np.float32), name="kernel")
    bias = keras.Variable(np.full(3, 5.0, np.float32), name="bias")
    scale = keras.Variable(np.full(3, 1.0, np.float32), name="scale")
    hp = _hp(weight_decay=0.1)
    # 0.1 * (sum(kernel**2) / 2 + sum(scale**2) / 2); the bias is skipped.
    assert float(optimizers.weight_decay_loss([kernel, bias, scale], hp)) == pytest.approx(
        0.1 * (12.0 + 1.5)
    )
    with tf.GradientTape() as tape:
        loss = optimizers.weight_decay_loss([kernel], hp)
    np.testing.assert_allclose(tape.gradient(loss, kernel).numpy(), 0.1 * 2.0 * np.ones((2, 3)))
    assert float(optimizers.weight_decay_loss([kernel], _hp(weight_decay=0.0))) == 0.0
    decoupled = _hp(weight_decay=0.1, optimizer="adamw")
    assert float(optimizers.weight_decay_loss([kernel], decoupled)) == 0.0


# ------------------------------------------------------------- MirroredStrategy
_MIRRORED_SCRIPT = textwrap.dedent(
    """
    import json
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import numpy as np
    from t2t.hparams.basic import basic_params1
    from t2t.trainer import learning_rate, optimizers

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 4)).astype(np.float32) * 3.0
    y = rng.normal(size=(4, 3)).astype(np.float32)
    w0 = rng.normal(size=(4, 3)).astype(np.float32)
    GLOBAL_BATCH = 4

    def run(strategy, name, mixed_precision):
        hp = basic_params1()
        hp.optimizer = name
        hp.clip_grad_norm = 1.0
        hp.weight_decay = 0.01
        hp.learning_rate_schedule = "constant*linear_warmup"
        hp.learning_rate_constant = 0.1
        hp.learning_rate_warmup_steps = 2
        with strategy.scope():
            kernel = keras.Variable(w0, name="kernel")
            bias = keras.Variable(np.zeros(3, np.float32), name="bias")
            schedule = learning_rate.LearningRateSchedule(hp)
            opt = optimizers.create_optimizer(hp, schedule, mixed_precision=mixed_precision)
            opt.build([kernel, bias])
        variables = [kernel, bias]
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).repeat()
        iterator = iter(strategy.experimental_distribute_dataset(dataset))

        def replica_step(batch):
            bx, by = batch
            with tf.GradientTape() as tape:
                per_example = tf.reduce_sum(tf.square(bx @ kernel + bias - by), axis=-1)
                loss = tf.reduce_sum(per_example) / GLOBAL_BATCH
                loss += tf.nn.scale_regularization_loss(optimizers.weight_decay_loss(variables, hp))
                scaled = opt.scale_loss(loss)
            grads = tape.gradient(scaled, variables)
            loss_scale = getattr(opt, "dynamic_scale", None)
            grads, norm = optimizers.clip_gradients(grads, hp.clip_grad_norm, loss_scale=loss_scale)
            opt.apply_gradients(zip(grads, variables))
            return norm

        @tf.function
        def step():
            norm = strategy.run(replica_step, args=(next(iterator),))
            return strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None)

        norms = [float(step()) for _ in range(3)]
        values = [strategy.experimental_local_results(v.value) for v in variables]
        return norms, [[r.numpy().tolist() for r in v] for v in values]

    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    out = {}
    for name, mp in [("sgd", None), ("adam", None), ("adafactor", None), ("momentum", "float16")]:
        out[f"{name}-{mp}"] = {
            "one": run(tf.distribute.get_strategy(), name, mp),
            "two": run(mirrored, name, mp),
        }
    print("RESULT" + json.dumps(out), flush=True)
    import os
    os._exit(0)  # TensorFlow's interpreter teardown takes 10-40 s here
    """
)


def test_mirrored_strategy_matches_one_device():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, "-c", _MIRRORED_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    results = json.loads(line[len("RESULT") :])
    for key, result in results.items():
        (norms_one, values_one), (norms_two, values_two) = result["one"], result["two"]
        assert norms_one[0] > 1.0, key  # clipping is active
        np.testing.assert_allclose(norms_two, norms_one, rtol=1e-5, err_msg=key)
        for one, two in zip(values_one, values_two, strict=True):
            for replica in two:  # both replicas hold the single-device values
                np.testing.assert_allclose(replica, one[0], rtol=1e-5, atol=1e-6, err_msg=key)
