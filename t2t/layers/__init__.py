"""Layers shared by models, one concept per module: attention, feed-forward,
positional encodings, modalities (feature embeddings, output heads and losses)."""
