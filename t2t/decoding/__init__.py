"""Inference: choosing tokens (greedy, sampling), beam search, decoding loops."""
