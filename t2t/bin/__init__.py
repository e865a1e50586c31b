"""Console scripts: the only place that defines and reads flags."""
