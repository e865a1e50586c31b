"""Hyperparameter sets of the research models (t2t/models/research/)."""
