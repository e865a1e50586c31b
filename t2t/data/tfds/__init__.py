"""TensorFlow Datasets data sets as problems (`tfds_<dataset>[/<config>]`)."""
