"""The suite's benchmarks in run order, and the path names of the training and resnet
races' rows: shared by the suite (suite.py) and the report (report.py), which must not
import each other."""

from __future__ import annotations

BENCHMARKS = ("training", "resnet", "input_pipeline", "decoding", "datagen", "distributed",
              "revnet_memory", "dropout", "mesh_layouts", "image_sampling", "serving")
TRAINER_PATH = "t2t Trainer"  # training.TRAINER (not imported here: it imports TensorFlow)
BARE_PATH, TORCH_PATH = "bare tf.function", "torch nn.Transformer"
TORCH_COMPILED_PATH = "torch compiled"  # training.TORCH_COMPILED
TORCH_RESNET_PATH = "torch ResNet"  # resnet.TORCH
