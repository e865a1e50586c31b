"""Cluster tools: TF_CONFIGs, a local multi-process launcher, Kubernetes TFJob manifests.

Imports no TensorFlow: these modules only build JSON and manage processes.

- `tf_config`: cluster specs, per-task TF_CONFIG dicts, host:port parsing, free ports.
- `launch`: starts one process per task with its TF_CONFIG, streams their logs with a
  `[type:index] ` prefix, stops them all when one fails, forwards SIGINT/SIGTERM.
- `tfjob`: a Kubeflow training-operator `TFJob` manifest and its YAML/JSON text.
"""
