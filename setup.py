"""Installs t2t and its console scripts (t2t-datagen, t2t-trainer, ...)."""

from setuptools import find_packages, setup

CORE_DEPENDENCIES = [
    # Keras 3 ships as `keras` with TensorFlow >= 2.16; 2.21 is what CI pins.
    "tensorflow>=2.16,<2.22",
    "tensorflow-datasets>=4.9",
    "importlib_resources",  # tensorflow-datasets imports it without declaring it
    "numpy>=1.26",
    "sentencepiece>=0.2",
    "pillow",  # image problems: decoding, resizing and re-encoding images
    "absl-py>=2.0",
    "gin-config>=0.5",
    "tensorboard>=2.16",  # tf.summary needs it; TensorFlow does not install it
    "sacrebleu>=2.0",  # BLEU and chrF of decodes, with their signatures
    "tensorflow-text>=2.16,<2.22",  # in-graph SentencePiece in exported SavedModels
]

setup(
    name="t2t",
    version="0.1.0",
    description="Standard models and data sets, one trainer: Tensor2Tensor rebuilt on TF2/Keras 3.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["t2t", "t2t.*"]),
    package_data={"t2t.serving": ["web/*.html"]},  # t2t-serve's try-it page
    install_requires=CORE_DEPENDENCIES,
    extras_require={
        # selenium: the try-it page's browser test (Chromium); hypothesis: the request
        # parsers' fuzz tests
        "dev": ["pytest>=8", "pytest-timeout", "pytest-xdist", "ruff", "selenium>=4.10",
                "hypothesis>=6.100"],
        "profile": ["tensorboard-plugin-profile"],  # TensorBoard's view of --profile_steps traces
        "regression": ["matplotlib"],  # eval-curve plots of python -m regression
        # t2t-serve: the HTTP server, TF Serving's gRPC API (its protos and stubs), metrics
        "serve": ["aiohttp>=3.9", "grpcio>=1.60", "tensorflow-serving-api>=2.16",
                  "prometheus-client>=0.20"],
        "ctranslate2": ["ctranslate2>=4.0"],
        # the docs site: mkdocs build / serve, the Material theme, the Python API pages
        "docs": ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings-python>=1.10"],  # t2t-exporter --format=ctranslate2
        # t2t-import: safetensors reads the weights; torch reads pytorch_model.bin;
        # transformers makes the reference models of the equality tests
        "import": ["safetensors>=0.4", "torch>=2.1", "transformers>=4.40"],
        # speech problems: WAV/FLAC reading, resampling, WER/CER
        "speech": ["soundfile>=0.12", "soxr>=0.3", "jiwer>=3.0"],
        "summarization": ["rouge-score>=0.1.2"],  # ROUGE of summarize_* decodes
        "tflite": ["ai-edge-litert>=2.0"],  # t2t-exporter --format=tflite: the LiteRT interpreter
        "tuning": ["optuna>=4.0", "cmaes", "matplotlib"],  # t2t-tuner: samplers, pruning, storage, plots
    },
    entry_points={
        "console_scripts": [
            "t2t-datagen=t2t.bin.t2t_datagen:run",
            "t2t-trainer=t2t.bin.t2t_trainer:run",
            "t2t-decoder=t2t.bin.t2t_decoder:run",
            "t2t-exporter=t2t.bin.t2t_exporter:run",
            "t2t-import=t2t.bin.t2t_import:run",
            "t2t-bleu=t2t.bin.t2t_bleu:run",
            "t2t-avg-all=t2t.bin.t2t_avg_all:run",
            "t2t-translate-all=t2t.bin.t2t_translate_all:run",
            "t2t-tuner=t2t.bin.t2t_tuner:run",
            "t2t-serve=t2t.bin.t2t_serve:run",
            "t2t-launch=t2t.bin.t2t_launch:run",
            "t2t-make-tf-configs=t2t.bin.t2t_make_tf_configs:run",
        ],
    },
)
