"""The data framework: how a data set becomes a `tf.data` pipeline of feature dicts.

The data path, in the order it runs (`t2t-datagen`, then `t2t-trainer`):

  generation/  download (mirrors, checksums, resume), extract archives, and write sharded
               TFRecord files (generator_utils: T2T's names)
  encoders/    vocabularies: text, subword (T2T's SubwordTextEncoder), SentencePiece, tokenizer
  problem.py   the Problem base class: generate_data -> files; dataset -> tf.data
  bases/       the kinds of problem data sets subclass: text-to-text, translation, image,
               speech (T2T's text_problems, translate, image_utils, speech)
  pipeline/    the input pipeline: decode, subword sampling, length filter and its report,
               bucketing and batching
  tfds/        any TensorFlow Datasets data set as a problem (`tfds_<name>`)
  inspection/  reading prepared data back: statistics, train/eval overlap, the docs' problem catalog

multi_problem.py (several problems as one, "a+b") and synthetic_pairs.py (pairs made by a
model: "distilled:P", "backtranslated:P") combine registered problems. The data sets
themselves live in `t2t.problems`, grouped by family; this package never imports them.
"""
