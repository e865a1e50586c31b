"""t2t-import: start from a published model. Reads a local Hugging Face checkpoint folder
(MarianMTModel / OPUS-MT, T5ForConditionalGeneration v1.0 and v1.1, mT5) into a t2t run
folder that t2t-trainer fine-tunes and t2t-decoder, t2t-exporter and t2t-serve use as
they use any run.

  t2t-import --from_dir=opus-mt-en-de --output_dir=RUN
  t2t-decoder --output_dir=RUN --decode_from_file=en.txt --decode_to_file=de.txt
  t2t-datagen --problem=P --use_vocab_from=RUN --data_dir=DATA   # P's data, RUN's vocabulary
  t2t-trainer --problem=P --data_dir=DATA --output_dir=RUN --train_steps=1000

Nothing is downloaded: get the folder on a machine with internet
(`huggingface-cli download Helsinki-NLP/opus-mt-en-de --local-dir opus-mt-en-de`) and
copy it. Needs `pip install 't2t[import]'` (safetensors; torch for pytorch_model.bin).
"""

from __future__ import annotations

import os

from absl import flags

from t2t.bin import common_flags, flag_help, output_paths

FLAGS = flags.FLAGS

flags.DEFINE_string("from_dir", None, "A local Hugging Face checkpoint folder: config.json, "
                    "model.safetensors (or pytorch_model.bin) and the tokenizer's files "
                    "(Marian: source.spm, target.spm, vocab.json; T5: spiece.model).")
flags.DEFINE_string("output_dir", None, "The t2t run folder to write (new or empty).")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        common_flags.fail(f"unexpected arguments {argv[1:]}; flags look like --from_dir=DIR.")
    missing = [f"--{name}" for name in ("from_dir", "output_dir") if not FLAGS[name].value]
    if missing:
        common_flags.fail(f"{', '.join(missing)} required: t2t-import --from_dir=HF_FOLDER "
                          f"--output_dir=RUN.")
    output_dir = os.path.expanduser(FLAGS.output_dir)
    output_paths.check_dir("output_dir", output_dir)  # before TensorFlow starts
    common_flags.import_tensorflow()
    from t2t.pretrained import checkpoint_files, import_run, vocab, weight_mapping

    try:
        summary = import_run.import_checkpoint(os.path.expanduser(FLAGS.from_dir), output_dir)
    except (checkpoint_files.CheckpointFolderError, weight_mapping.UnsupportedCheckpointError,
            vocab.PretrainedTokenizerError, FileExistsError, ImportError) as e:
        common_flags.fail(str(e))
    print(f"Imported {summary.architecture} from {FLAGS.from_dir}: {summary.parameters:,} "
          f"parameters, {summary.vocab_size} ids; hparams_set {summary.hparams_set} with "
          f"--hparams={summary.hparams}", flush=True)
    print(f"Run folder: {summary.output_dir} (problem {import_run.PROBLEM}; fine-tune with "
          f"t2t-datagen --problem=P --use_vocab_from={summary.output_dir}, then t2t-trainer "
          f"--problem=P --output_dir={summary.output_dir})", flush=True)


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-import")
    flag_help.run(main, __doc__, hidden=common_flags.SETUP_FLAGS)


if __name__ == "__main__":
    run()
