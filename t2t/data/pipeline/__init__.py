"""The input pipeline: prepared files -> batched `tf.data` feature dicts."""
