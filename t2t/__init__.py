"""t2t: standard models and data sets on TensorFlow 2 and Keras 3.

Importing this package is cheap: it imports no TensorFlow. Use `t2t.registry` to find
problems, models and hyperparameter sets by name.
"""

__version__ = "0.1.0"

# Tensor2Tensor's import paths (tensor2tensor.data_generators.problem, ...) answered by
# t2t's modules while the real tensor2tensor is not installed: a finder, no imports.
from t2t import compat as _compat  # noqa: E402

_compat.enable()
