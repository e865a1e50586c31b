"""t2t: standard models and data sets on TensorFlow 2 and Keras 3.

Importing this package is cheap: it imports no TensorFlow. Use `t2t.registry` to find
problems, models and hyperparameter sets by name.
"""

__version__ = "0.1.0"
