"""Published models brought into t2t: Hugging Face checkpoints (Marian / OPUS-MT, T5)
read into t2t run folders that t2t-trainer, t2t-decoder, t2t-exporter and t2t-serve use
unchanged (`t2t-import`). Nothing here imports torch or transformers at import time."""
