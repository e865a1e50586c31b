"""Serving: in-graph tokenizers, SavedModel export (with a parity gate) and checkpoint averaging.

    t2t-exporter --output_dir=RUN --decode_hparams="beam_size=4,alpha=0.6"
    t2t-avg-all --model_dir=RUN --output_dir=RUN_AVG --n=8
"""
