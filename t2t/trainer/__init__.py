"""Training: learning-rate schedules, optimizers and evaluation metrics."""
