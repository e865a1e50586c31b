"""Getting raw data and writing it: download, extract, sharded TFRecord files."""
