"""The regression cases: what to train, for how long, and which final metric to expect.

Each entry is a `Case` (regression/case_spec.py says what its fields mean); image cases
beyond classification are in regression/image_cases.py. `validate` checks the table.
"""

from __future__ import annotations

from collections.abc import Iterable

from regression import baselines
from regression.case_spec import (
    CPU_2CORE,
    DECODE_METRICS,
    FASHION_MNIST_MIRROR,
    POST_TRAINING_METRICS,
    STRATEGIES,
    Case,
)
from regression.image_cases import IMAGE_CASES

_REVERSE = dict(
    problem="algorithmic_reverse_binary40_test", model="transformer",
    hparams_set="transformer_tiny", hparams="learning_rate_warmup_steps=400",
)
_EVAL_WHOLE_DEV_EVERY_500 = {"local_eval_frequency": 500, "eval_steps": 0}
# 256-byte examples, 16 per batch; transformer_tiny's own schedule at its peak rate.
_DOCSTRINGS = dict(
    problem="languagemodel_python_docstrings", model="transformer",
    hparams_set="transformer_tiny",
    hparams="batch_size=4096,max_length=256,learning_rate_warmup_steps=400,"
            "learning_rate_constant=2.0",
)

# The trainer issue's bar for a seq2seq algorithmic run: >= 90% per-sequence and >= 99%
# per-token dev accuracy.
_SEQ2SEQ_TARGET = dict(metric="accuracy_per_sequence", band=(0.90, 1.0),
                       also={"accuracy": (0.99, 1.0)})

CASES: tuple[Case, ...] = (
    Case(
        name="transformer_tiny_reverse", **_REVERSE, train_steps=4000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        **_SEQ2SEQ_TARGET,
        expected_minutes=14,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-25): 1.0 per sequence and per "
                    "token at step 4000 (1.0 from step 2500 on; 0.93 at 2000), 13.2 min",
        notes="The README's quick-start run. At 2000 steps (2026-11-25) it reached 0.91 per "
              "sequence but 0.9851 per token, below the issue's 0.99: the dev curve is still "
              "noisy there (0.79 at 1000, 0.75 at 1500).",
    ),
    Case(
        name="transformer_tiny_reverse_quick", problem=_REVERSE["problem"],
        model="transformer", hparams_set="transformer_tiny",
        # CI's convergence check, sized for CI's time: transformer_tiny at half its width
        # (hidden 64, filter 256) and a quarter of its batch learns the task in 800 small
        # steps, evaluated once at the end (the full width: 0.9404 at 1000 steps for 1.6
        # times the CPU, 2026-11-27).
        hparams="learning_rate_warmup_steps=400,batch_size=1024,hidden_size=64,"
                "filter_size=256", train_steps=800,
        # Repeatable: undetermined runs of this case ended anywhere in 0.836-0.885, too
        # close to the band's 0.80 for a CI check.
        trainer_flags={"local_eval_frequency": 800, "eval_steps": 0, "deterministic": True,
                       "random_seed": 1},
        metric="accuracy", band=(0.80, 1.0), quick=True, expected_minutes=2,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-27): 0.9508 at step 800, BLEU "
                    "94.02, 2.5 min for train, decode and export (export since dropped: 35 s; the same deterministic run "
                    "gave 0.7303 at 500, 0.8808 at 750, 0.9061 at 1000: the dev curve is "
                    "noisy); at full width (hidden 128) 0.9404 in 270 s of CPU",
        # No export: CI's serving tests export trained models with the parity gate, and
        # this case's export cost CI 50 s of its 25 minutes.
        decode_hparams="beam_size=4,alpha=0.6",
        # BLEU of binary strings tracks per-token accuracy: 87.8 at 0.885 (an undetermined
        # run, 2026-11-25), 91.5 at 0.930; 75 sits below what the 0.80 accuracy floor gives.
        also={"bleu": (75.0, 100.0)},
        # Seed 1, deterministic, at df8dfe7 (2026-11-28): 0.9508. The figure is noisy: 30
        # runs with seeds 1-5 and other dropout masks (three kernels) gave 0.893-0.984,
        # mean 0.935, sd 0.023 (#47); 6a83699's seed-1 run gave 0.8182, 5 sd below. The
        # floor 0.8708 is 2.8 sd below that mean: it fails 0.82, passes every one of the 30.
        recorded={"accuracy": (0.9508, 0.08)},
        notes="CI's convergence check (tests/regression/test_cases_converge.py runs this "
              "case alone): per-token accuracy after a short run, then beam-4 decoding of "
              "the dev set with t2t-decoder.",
    ),
    Case(
        name="transformer_tiny_addition", problem="algorithmic_addition_binary40_test",
        model="transformer", hparams_set="transformer_tiny",
        hparams="learning_rate_warmup_steps=400,layer_prepostprocess_dropout=0.0,"
                "label_smoothing=0.0", train_steps=25000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        **_SEQ2SEQ_TARGET,
        expected_minutes=75,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-25): 1.0 per sequence, 1.0 per "
                    "token at step 25000 in 73.8 min (first 1.0 at step 20500)",
        notes="100k training examples; no dropout or label smoothing. Per-sequence accuracy "
              "climbs slowly and unevenly: 0.04 at 500 steps, 0.50 at 6500, 0.70 at 10500, "
              "0.935 at 15500, 1.0 from 20500 on (2026-11-25); a run on 2026-11-24 was "
              "only at 0.83 at step 15000, hence 25000 steps.",
    ),
    Case(
        name="transformer_tiny_lm_reverse", problem="algorithmic_lm_reverse_binary10",
        model="transformer", hparams_set="transformer_tiny",
        hparams="learning_rate_warmup_steps=400,label_smoothing=0.0", train_steps=4000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy", band=(0.70, 0.74), also={"neg_log_perplexity": (-0.52, -0.46)},
        expected_minutes=7,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-25): accuracy 0.7082, "
                    "neg_log_perplexity -0.5018 at step 4000 in 6.5 min (0.66 at 2000, "
                    "0.705-0.719 from 2500 on); 2000 steps gave 0.6875 on 2026-11-24",
        notes="Decoder-only language model of \"bits | reversed bits\": the Bayes-optimal "
              "per-token accuracy is 0.7231 and neg_log_perplexity -0.4704 nats "
              "(AlgorithmicLmReverseBinary10.ideal_metrics); the bands sit just below.",
    ),
    Case(
        name="transformer_docstrings_bytes", **_DOCSTRINGS, train_steps=3000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="test_bits_per_byte", band=(2.0, 2.40), eval_split_after="test",
        below_baseline="xz_bits_per_byte",
        expected_minutes=9,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): test 2.2556 bits per byte "
                    "(xz -9: 2.4633) in 14.4 min beside other jobs; dev curve 3.307 (500), "
                    "2.588 (1000), 2.409 (1500), 2.326 (2000), 2.271 (2500), 2.247 (3000). "
                    "Two more runs that day: test 2.2615 (dev 2.236); the README's "
                    "commands from a fresh clone, alone on the machine: test 2.2377 (dev "
                    "2.2171) in 8 min 15 s",
        notes="Byte-level decoder-only language model of real English: the docstrings of "
              "the Python standard library (one document per module, split by module; "
              "languagemodel_python_docstrings). Test-split bits per byte must beat "
              "`xz -9` on the same test text (regression.baselines computes it in the run).",
    ),
    Case(
        name="transformer_docstrings_bytes_quick", problem=_DOCSTRINGS["problem"],
        model="transformer", hparams_set="transformer_tiny",
        hparams="batch_size=2048,max_length=256,learning_rate_warmup_steps=400,"
                "learning_rate_constant=2.0", train_steps=600,
        trainer_flags={"local_eval_frequency": 600, "eval_steps": 0, "deterministic": True,
                       "random_seed": 1},
        metric="test_bits_per_byte", band=(3.0, 3.5), eval_split_after="test",
        quick=True, expected_minutes=3,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-27): 3.2732 (dev 3.2766 at step "
                    "600) in 3.1 min alone; with 4096-token batches 2.9085 (2026-11-26) and "
                    "2.9196 (2026-11-27) in 4.7 min",
        notes="The quick subset's language-model check: the same model with half its "
              "batch after 600 steps (xz is not yet beaten there; a unigram model of the "
              "bytes gives about 4.5 bits). Not in CI's test run since 2026-11-27 (its time "
              "on 2 cores); `python -m regression run` runs it.",
    ),
    Case(
        name="transformer_tiny_sentiment", problem="sentiment_synthetic",
        model="transformer", hparams_set="transformer_tiny",
        # transformer_tiny's own peak rate (constant 2.0: 0.0088 at step 400) stalls this
        # classifier near 0.8: 0.808 after 5000 steps; constant 0.2 is slower than 0.5.
        hparams="learning_rate_warmup_steps=400,learning_rate_constant=0.5", train_steps=6000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy", band=(0.95, 1.0), expected_minutes=11,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-25): 0.9900 at step 6000 "
                    "(0.81 at 500, 0.93 at 2000, 0.967 at 3500, 0.9785 at 5000)",
        notes="Text classification (encoder-only transformer, class-label top) of "
              "template movie reviews with negation and mixed opinions; the label is a "
              "function of the text, so 1.0 is reachable. Reading polarity words alone "
              "scores 0.674 on these reviews and per-clause negation without intensity "
              "0.960, so the band asks for both.",
    ),
    Case(
        name="lstm_attention_reverse", problem="algorithmic_reverse_binary40_test",
        model="lstm_seq2seq_attention", hparams_set="lstm_luong_attention",
        train_steps=3000, trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy_per_sequence", band=(0.90, 1.0), expected_minutes=4,
        measured_on="2-core AMD EPYC CPU, TF 2.21: 1.0 at step 3000 in 3.1 min (--full run "
                    "of 2026-11-25; 7.7 min on 2026-11-24)",
        notes="The classic baseline: a 2-layer LSTM encoder-decoder with Luong attention.",
    ),
    Case(
        name="lstm_seq2seq_reverse", problem="algorithmic_reverse_binary40_test",
        model="lstm_seq2seq", hparams_set="lstm_seq2seq", train_steps=3000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500, metric="accuracy_per_sequence",
        band=(0.90, 1.0), expected_minutes=4,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): 1.0 at step 3000 (0.81, 0.96, "
                    "0.98, 1.0, 0.99 at 500-2500) in 6.8 min beside other work",
        notes="The plain 2-layer LSTM encoder-decoder (no attention): the whole input "
              "passes through the encoder's final state.",
    ),
    Case(
        name="lstm_bidirectional_reverse", problem="algorithmic_reverse_binary40_test",
        model="lstm_seq2seq_bidirectional_encoder", hparams_set="lstm_seq2seq",
        train_steps=3000, trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy_per_sequence", band=(0.90, 1.0), expected_minutes=5,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): 1.0 from step 1000 to 3000 "
                    "(0.82 at 500) in 12.7 min with the machine heavily shared",
    ),
    Case(
        name="lstm_attention_bidirectional_reverse",
        problem="algorithmic_reverse_binary40_test",
        model="lstm_seq2seq_attention_bidirectional_encoder",
        hparams_set="lstm_luong_attention", train_steps=3000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500, metric="accuracy_per_sequence",
        band=(0.90, 1.0), expected_minutes=5,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): 1.0 at every evaluation, "
                    "steps 500-3000, in 14.9 min with the machine heavily shared",
    ),
    Case(
        name="bytenet_reverse", problem="algorithmic_reverse_binary40_test", model="bytenet",
        hparams_set="bytenet_tiny", train_steps=2500, trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy_per_sequence", band=(0.85, 1.0), expected_minutes=4, export=True,
        also={"export_parity": (1.0, 1.0)},
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): 0.95 at step 2500 (0.80, "
                    "0.73, 0.97, 0.97 at 500-2000) in 3.5 min beside other work, export "
                    "parity passed; 0.99 at 2500 in an earlier 3-min run",
        notes="Dilated causal convolutions over the targets, conditioned on the dilated "
              "convolutional encoding of the inputs; decoded by t2t-decoder's uncached "
              "step and exported with the parity gate.",
    ),
    Case(
        name="slicenet_reverse", problem="algorithmic_reverse_binary40_test",
        model="slicenet", hparams_set="slicenet_tiny_cpu", train_steps=1000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500, metric="accuracy_per_sequence",
        band=(0.90, 1.0), expected_minutes=3, export=True, also={"export_parity": (1.0, 1.0)},
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): 1.0 at steps 500 and 1000, "
                    "export parity passed, 3.2 min beside a test run; 1.0 from step 500 to 2000 "
                    "in a 2000-step run",
        notes="Depthwise-separable convolutions with attention to the encoder; "
              "slicenet_1tiny's weight decay 3.0 and dropout 0.5 do not train here.",
    ),
    Case(
        name="basic_fc_fashion_mnist", problem="image_fashion_mnist", model="basic_fc_relu",
        hparams_set="basic_fc_small", train_steps=1000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500, metric="accuracy", band=(0.82, 0.89),
        expected_minutes=1, data_mirror=FASHION_MNIST_MIRROR,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): 0.8525 at step 1000 (0.839 "
                    "at 500) in 1.0 min beside other work",
        notes="Tensor2Tensor's basic_fc_relu: flatten, 2 x dense 256 + ReLU.",
    ),
    Case(
        name="resnet_fashion_mnist", problem="image_fashion_mnist", model="resnet",
        hparams_set="resnet_tiny_cpu", train_steps=2000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy", band=(0.80, 0.90), expected_minutes=2,
        measured_on="2-core AMD EPYC CPU, TF 2.21: 0.8588 at step 2000 in 1.6 min (--full "
                    "run of 2026-11-25); 0.836 on 2026-11-22",
        data_mirror=FASHION_MNIST_MIRROR,
        notes="About two epochs at batch 64; needs the dataset-fashion-mnist package.",
    ),
    Case(
        name="shake_shake_fashion_mnist", problem="image_fashion_mnist", model="shake_shake",
        hparams_set="shake_shake_quick",
        hparams="num_hidden_layers=8,hidden_size=16,batch_size=64", train_steps=1000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy", band=(0.80, 0.92), expected_minutes=3,
        measured_on="2-core AMD EPYC CPU, TF 2.21: 0.8507 at step 1000 in 2.0 min (--full "
                    "run of 2026-11-25); 0.857 on 2026-11-22",
        data_mirror=FASHION_MNIST_MIRROR,
        notes="shake_shake_quick shrunk for a CPU; its cosine schedule cycles every 1000 "
              "steps (low learning rate at 1000, 3000, ...), so the run stops at a trough. "
              "Needs the dataset-fashion-mnist package.",
    ),
    Case(
        name="xception_fashion_mnist", problem="image_fashion_mnist", model="xception",
        hparams_set="xception_tiny_cpu", train_steps=2000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy", band=(0.83, 0.92), expected_minutes=4,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): 0.8691 at step 2000 in 4.9 "
                    "min (machine shared with another run); 0.8797 at 2000 in a 3500-step run",
        data_mirror=FASHION_MNIST_MIRROR,
        notes="xception_tiny's widths with the full entry flow (28x28 -> 2x2 before the exit "
              "flow), batch 64: about two epochs. Needs the dataset-fashion-mnist package.",
    ),
    Case(
        name="revnet_fashion_mnist", problem="image_fashion_mnist", model="revnet",
        hparams_set="revnet_tiny_cpu", train_steps=2000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy", band=(0.87, 0.94), expected_minutes=7, export=True,
        also={"export_parity": (1.0, 1.0)},
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): 0.9116 at step 2000 (0.70, "
                    "0.8688, 0.8987 at 500-1500) in 6.5 min beside other work; export parity "
                    "passed",
        data_mirror=FASHION_MNIST_MIRROR,
        notes="Reversible blocks whose backward pass recomputes activations (custom "
              "gradient); batch 64, a cosine decay to zero at step 2000. Needs the "
              "dataset-fashion-mnist package.",
    ),
    Case(
        name="neural_gpu_reverse", problem="algorithmic_reverse_binary40_test",
        model="neural_gpu", hparams_set="neural_gpu_tiny", train_steps=2000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy_per_sequence", band=(0.95, 1.0), expected_minutes=3,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26): 1.0 at step 2000 in 1.6 min; "
                    "1.0 from step 1000 on in a 5000-step run",
        notes="Lengths 1-10 in training and dev. The Neural GPU's claim, generalization to "
              "inputs much longer than seen in training, needs a problem whose dev split is "
              "longer than its train split: not a case yet.",
    ),
    Case(
        name="neural_gpu_reverse_dev40", problem="algorithmic_reverse_binary10_dev40",
        model="neural_gpu", hparams_set="neural_gpu_tiny", hparams="dropout=0.1",
        train_steps=2500, trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy_per_sequence", band=(0.80, 1.0), also={"accuracy": (0.99, 1.0)},
        expected_minutes=3,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26), beside other work: 1.0 at "
                    "step 2500 in 2.4 min (0.54, 1.0, 1.0, 0.815 at 500-2000); 1.0 from "
                    "step 2000 on in a 3000-step run; without dropout 0.37 at step 4000",
        notes="Length generalization: trained on lengths 1-10, evaluated on 200 inputs of "
              "length 40 only. Dropout 0.1 is T2T's neural_gpu value (neural_gpu_tiny has "
              "none). The transformer on the same dev set: transformer_tiny_reverse_dev40.",
    ),
    Case(
        name="transformer_tiny_reverse_dev40", problem="algorithmic_reverse_binary10_dev40",
        model="transformer", hparams_set="transformer_tiny",
        hparams="learning_rate_warmup_steps=400", train_steps=2000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy", band=(0.05, 0.60), also={"accuracy_per_sequence": (0.0, 0.05)},
        expected_minutes=6,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-26), beside other work: accuracy "
                    "0.3472, accuracy_per_sequence 0.0 at step 2000 in 15.4 min; 0.19 and 0.0 "
                    "in a second run (11 min)",
        notes="The Neural GPU's comparison (neural_gpu_reverse_dev40): the same problem, "
              "the transformer_tiny_reverse recipe. Trained on lengths 1-10 it reverses no "
              "input of length 40: the band records that it does not generalize in length.",
    ),
    Case(
        name="transformer_tiny_reverse_multi_worker", **_REVERSE, train_steps=1000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500, strategy="multi_worker_2",
        metric="accuracy_per_sequence", band=(0.90, 1.0), expected_minutes=8,
        measured_on="2-core AMD EPYC CPU, TF 2.21: 1.0 at step 1000 (0.64 at 500) in 7.6 "
                    "min at ~2.5 steps/s, alone on the machine (--full run of 2026-11-25); "
                    "1.0 (0.77 at 500) in 22.7 min beside other jobs earlier that day",
        notes="transformer_tiny_reverse on two worker processes (t2t-launch, "
              "MultiWorkerMirroredStrategy over 127.0.0.1). Two replicas make the global "
              "batch twice the one-device case's, so its 1000 steps train on as many "
              "examples as transformer_tiny_reverse's 2000, and share its band. On 2 cores "
              "the two processes share them: ~0.4 s a step alone on the machine, 1.3 s "
              "beside other jobs (the per-step collectives over gRPC wait for the slower "
              "worker).",
    ),
    Case(
        name="transformer_tiny_reverse_ps", **_REVERSE, train_steps=4000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500, strategy="ps_1_worker_1",
        metric="accuracy_per_sequence", band=(0.90, 1.0), expected_minutes=17,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-30, 24e17ac), alone on the "
                    "machine: 0.98 at step 4000 (0.27, 0.80, 0.95, 0.91 at 500-2000, 1.0 at "
                    "2500-3500) in 15.8 min. At 2000 steps, the case's length before "
                    "24e17ac: 1.0 twice (2026-11-25), 0.79 (FAIL) and 0.90 (2026-11-30)",
        notes="transformer_tiny_reverse with ParameterServerStrategy (t2t-launch: chief, "
              "1 ps, 1 worker over 127.0.0.1; asynchronous, --sync=false). One replica: "
              "like transformer_tiny_reverse it trains 4000 steps (at 2000 one replica's "
              "figure still swings, 0.79-1.0).",
    ),
    Case(
        name="transformer_tiny_reverse_mesh_2x2", problem=_REVERSE["problem"],
        model="transformer", hparams_set="transformer_tiny",
        hparams="learning_rate_warmup_steps=400,mesh_shape=batch:2;model:2,"
                "layout=batch:batch;vocab:model;d_ff:model;heads:model",
        train_steps=4000, trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="accuracy_per_sequence", band=(0.90, 1.0), expected_minutes=25,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-30, 24e17ac), alone on the "
                    "machine: 1.0 at step 4000 (0.17, 0.87, 0.96, 0.95, 0.99 at 500-2500, "
                    "1.0 at 3000-4000) in 21.3 min. At 2000 steps, the case's length before "
                    "24e17ac: 0.93, 0.93 (2026-11-28) and 0.96 (2026-11-30)",
        notes="transformer_tiny_reverse with its model laid out on a 2x2 DTensor mesh of "
              "logical CPUs (t2t.parallel): the batch split in 2, the vocabulary, "
              "feed-forward and attention heads split in 2. batch_size is the global batch "
              "on a mesh, as on one device: like transformer_tiny_reverse it trains 4000 "
              "steps with its band (at 2000 one replica's figure still swings, 0.79-1.0).",
    ),
    Case(
        name="transformer_tiny_reverse_mirrored", **_REVERSE, train_steps=2000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500, strategy="mirrored_cpu_2",
        metric="accuracy_per_sequence", band=(0.90, 1.0), expected_minutes=14,
        measured_on="2-core AMD EPYC CPU, TF 2.21: 1.0 at step 2000 (1.0 at 1000, 0.69 at "
                    "500) in 13.7 min at ~2.7 steps/s (--full run of 2026-11-25, resumed); "
                    "1.0 in 26.1 min on 2026-11-22",
        notes="transformer_tiny_reverse over two mirrored logical CPU devices.",
    ),
    Case(
        name="transformer_speech_tiny_espeak", problem="speech_synthetic_espeak",
        model="transformer", hparams_set="transformer_speech_tiny", train_steps=3000,
        trainer_flags=_EVAL_WHOLE_DEV_EVERY_500,
        metric="wer", band=(50.0, 75.0), also={"test_wer": (20.0, 42.0)},
        decode_hparams="beam_size=1", also_decode_splits=("test",),
        programs=("espeak-ng",), expected_minutes=26,
        measured_on="2-core AMD EPYC CPU, TF 2.21 (2026-11-28, e2312ce): dev (unseen voices) "
                    "WER 62.99 / CER 30.53, test (seen voices) WER 30.96 / CER 13.05 after "
                    "3000 steps; training with its evaluations 21.2 min (~2.7 steps/s), the "
                    "case 22.6 min plus 2.7 min of data generation; one run, so the bands "
                    "are that run's figures +-12 (dev) and +-10 (test) WER points",
        notes="Speech recognition of the espeak-ng corpus: WER (jiwer, percent) of greedy "
              "decodes of dev (held-out sentences in 3 voices never heard in training) "
              "and test (the same sentences in the training voices). The curve is the "
              "WER of 200 dev utterances at each evaluation: 236 (500 steps; insertions "
              "of an untrained decoder), 117, 93, 78, 70, 63 (3000). Joint CTC-attention "
              "training (ctc_loss_weight 0.3) is what makes it learn in this time.",
    ),
    # Headline results of Tensor2Tensor: only run where --hardware lists the hardware.
    Case(
        name="transformer_big_ende", problem="translate_ende_wmt32k", model="transformer",
        hparams_set="transformer_big", train_steps=300_000,
        trainer_flags={"local_eval_frequency": 10_000, "save_checkpoints_steps": 10_000},
        strategy="mirrored_gpu_8", metric="bleu", band=(27.5, 29.5), hardware="8xV100",
        measured_on="T2T's published result: ~28.4 BLEU on newstest2014 (8 GPUs)",
        expected_minutes=2 * 24 * 60,
        decode_hparams="beam_size=4,alpha=0.6",
        notes="Trains on Tensor2Tensor's WMT En-De mix (News Commentary v13 + CommonCrawl "
              "+ Europarl v7, ~4.6M pairs, 100 train shards), the data of the published "
              "figure. BLEU of t2t-decoder's beam-4 decodes of the dev split (newstest2013 "
              "here; the published figure is newstest2014).",
    ),
    Case(
        name="transformer_base_ende", problem="translate_ende_wmt32k", model="transformer",
        hparams_set="transformer_base", train_steps=250_000,
        trainer_flags={"local_eval_frequency": 10_000, "save_checkpoints_steps": 10_000},
        strategy="mirrored_gpu_8", metric="bleu", band=(26.5, 28.5), hardware="8xV100",
        measured_on="T2T's published result: ~27.3 BLEU on newstest2014 (8 GPUs)",
        expected_minutes=14 * 60,
        decode_hparams="beam_size=4,alpha=0.6",
        notes="Band centred on the published value (not measured here), which belongs "
              "to Tensor2Tensor's WMT En-De mix (News Commentary v13 + CommonCrawl + "
              "Europarl v7, ~4.6M pairs, 100 train shards), the data translate_ende_wmt32k "
              "prepares. BLEU of t2t-decoder's beam-4 decodes of the dev split "
              "(newstest2013).",
    ),
    Case(
        name="transformer_librispeech_test_clean", problem="librispeech_train_full_test_clean",
        model="transformer", hparams_set="transformer_librispeech", train_steps=250_000,
        trainer_flags={"local_eval_frequency": 10_000, "save_checkpoints_steps": 10_000},
        strategy="mirrored_gpu_8", metric="test_wer", band=(5.0, 9.0),
        decode_hparams="beam_size=4,alpha=0.6", also_decode_splits=("test",),
        hardware="8xV100", expected_minutes=3 * 24 * 60,
        measured_on="No published figure: Tensor2Tensor's README only says a Transformer "
                    "without a language model gets \"a really good word error rate\" "
                    "(tensor2tensor#1646 asks for a baseline; none was given). The band "
                    "centres on the ~7% test-clean WER a Tensor2Tensor user reported for "
                    "transformer_librispeech_tpu on the 960 h (tensor2tensor#1022).",
        notes="960 h of LibriSpeech; WER of beam-4 decodes of test-clean (and dev-clean as "
              "\"wer\"), Tensor2Tensor's default --train_steps. Not run here (2 CPU "
              "cores, no GPU, 60 GB of audio).",
    ),
    Case(
        name="shake_shake_cifar10", problem="image_cifar10", model="shake_shake",
        hparams_set="shakeshake_big", train_steps=700_000,
        trainer_flags={"local_eval_frequency": 10_000, "save_checkpoints_steps": 10_000,
                       "eval_steps": 0},
        metric="accuracy", band=(0.96, 0.98), hardware="1xGPU",
        measured_on="T2T's published result: ~97% CIFAR-10 accuracy (1 GPU, 700k steps)",
        expected_minutes=7 * 24 * 60,
    ),
)

CASES = (*CASES, *IMAGE_CASES)


# Metrics with a bounded range: a band equal to it checks nothing.
_WHOLE_RANGES = {"accuracy": (0.0, 1.0), "bleu": (0.0, 100.0), "chrf": (0.0, 100.0),
                 "wer": (0.0, float("inf")), "cer": (0.0, float("inf")),
                 "export": (0.0, 1.0)}


def by_name(cases: Iterable[Case] = CASES) -> dict[str, Case]:
    return {case.name: case for case in cases}


def validate(cases: Iterable[Case] = CASES) -> list[str]:
    """Problems with a case table (empty when it is sane)."""
    cases = list(cases)
    errors = []
    seen: set[str] = set()
    for case in cases:
        if case.name in seen:
            errors.append(f"duplicate case name {case.name!r}")
        seen.add(case.name)
        for metric, (low, high) in case.bands().items():
            if not low <= high:
                errors.append(f"{case.name}: {metric} band low {low} > high {high}")
            if metric.startswith("accuracy") and not 0.0 <= low <= high <= 1.0:
                errors.append(f"{case.name}: an accuracy band must lie within [0, 1]")
            whole = _WHOLE_RANGES.get(metric.split("_")[0])
            if whole is not None and (low, high) == whole:
                errors.append(f"{case.name}: the {metric} band {list(whole)} is the metric's "
                              f"whole range, so it can never fail: set the band it must reach")
        decoded = case.decode_hparams is not None
        post_metrics = (set(DECODE_METRICS) if decoded else set()) | (
            {"export_parity"} if case.export else set()) | (
            {"sample_agreement"} if case.sample_agreement else set())
        for metric in case.bands():
            if metric in POST_TRAINING_METRICS and metric not in post_metrics:
                needs = {"export_parity": "export=True",
                         "sample_agreement": "sample_agreement (a classifier case)"}
                errors.append(f"{case.name}: metric {metric!r} needs "
                              + needs.get(metric, "decode_hparams"))
            split, _, decode_metric = metric.partition("_")
            if (decode_metric in DECODE_METRICS and metric not in POST_TRAINING_METRICS
                    and not (decoded and split in case.also_decode_splits)):
                errors.append(f"{case.name}: metric {metric!r} needs decode_hparams and "
                              f"{split!r} in also_decode_splits")
        for metric, (value, tolerance) in case.recorded.items():
            if not case.trainer_flags.get("deterministic"):
                errors.append(f"{case.name}: a recorded {metric} needs a deterministic run "
                              f"(trainer_flags deterministic=True and a random_seed)")
            if tolerance <= 0 or metric not in {case.metric, *case.also}:
                errors.append(f"{case.name}: recorded {metric} ({value}, {tolerance}) needs "
                              f"a tolerance > 0 on a metric the case checks")
        split, _, name = case.metric.partition("_")
        split_metric = split in ("test", "train") and name not in DECODE_METRICS
        if split_metric and case.eval_split_after != case.metric.split("_")[0]:
            errors.append(f"{case.name}: metric {case.metric!r} needs "
                          f"eval_split_after={case.metric.split('_')[0]!r}")
        if case.below_baseline is not None:
            if case.below_baseline not in baselines.BASELINES:
                errors.append(f"{case.name}: unknown baseline {case.below_baseline!r} (known: "
                              f"{', '.join(baselines.BASELINES)})")
        if case.strategy not in STRATEGIES:
            errors.append(f"{case.name}: unknown strategy {case.strategy!r}")
        if case.train_steps <= 0:
            errors.append(f"{case.name}: train_steps must be positive")
        if not case.metric:
            errors.append(f"{case.name}: no metric")
        if case.quick and case.hardware != CPU_2CORE:
            errors.append(f"{case.name}: quick cases must run on {CPU_2CORE}")
    if not any(case.quick for case in cases):
        errors.append("no quick case: CI's quick subset would be empty")
    return errors
