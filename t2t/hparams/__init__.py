"""Hyperparameters: the HParams type, ranged sets for tuning, and registered sets."""
