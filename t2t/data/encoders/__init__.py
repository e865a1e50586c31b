"""Vocabularies and text encoders: ids <-> text (T2T's text_encoder and friends)."""
