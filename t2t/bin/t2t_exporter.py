"""t2t-exporter: export a trained model as a SavedModel for TF Serving.

  t2t-exporter --output_dir=RUN --decode_hparams="beam_size=4,alpha=0.6"
  saved_model_cli run --dir RUN/export/<version> --signature_def serving_default \\
      --input_exprs 'inputs=["1 0 1 1"]'

Writes EXPORT_DIR/<unix timestamp>/ (default EXPORT_DIR: OUTPUT_DIR/export) with the
signatures "serving_default" (raw text in, decoded text and scores out; image problems:
encoded image bytes in, class names out) and "serve_tf_example" (serialized
tf.train.Examples with int64 "inputs" ids in, ids and scores out; stock TF ops only).
The decode settings are fixed at export. Before the version directory appears, a fresh
process that imports only TensorFlow decodes dev examples with the SavedModel and must
agree with t2t's own decoding of the checkpoint (--skip_parity_check skips it).
--problem, --model, --hparams_set, --hparams, --data_dir and --t2t_usr_dir default to
the run's (run.json, hparams.json in --output_dir): `t2t-exporter --output_dir=RUN`
needs nothing else. SentencePiece problems need tensorflow-text, here and in
the serving process (`import tensorflow_text`); their exports also write an ids-only
SavedModel (stock ops, vocabulary in assets/) to EXPORT_DIR_ids_only/<same version>/;
--ids_only writes only that kind, in EXPORT_DIR.

An ensemble (--checkpoint_path=A:B: checkpoints or run folders of the same problem and
vocabulary; --ensemble_last=N: the run's last N checkpoints) exports as one SavedModel
whose signatures decode with the ensemble (t2t.decoding.ensemble; --ensemble_combine).

--format=keras writes a .keras file and a TFSMLayer SavedModel (OUTPUT_DIR/export_keras),
--format=tflite a LiteRT model (OUTPUT_DIR/export_tflite), --format=ctranslate2 a
CTranslate2 model folder (OUTPUT_DIR/export_ctranslate2; --quantization=int8|int16|float32)
for transformer runs; see --helpfull.
"""

from __future__ import annotations

import json
import os
import sys

from absl import flags

from t2t import config
from t2t.bin import common_flags, config_flags, ensemble_flags, flag_help, output_paths, run_flags

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(run_flags)  # --help lists the run and decode flags too
flags.adopt_module_key_flags(ensemble_flags)

config_flags.define(config.ExportConfig)
flags.DEFINE_enum("quantization", None, ["float32", "int8", "int16"],
                  "--format=ctranslate2: the weights' type (default float32; int8: fastest on "
                  "CPU, its agreement with t2t's decodes is checked and printed).")


def _show_specs(specs: dict[str, dict]) -> str:
    """'name: dtype[shape], ...'; a streaming LM's decoding state (the key/value cache, one
    tensor per layer and head) as one 'model_state_* (N tensors)' entry."""
    from t2t.serving.lm_serving import MODEL_STATE_PREFIX

    shown = [f"{k}: {v['dtype']}{v['shape']}" for k, v in sorted(specs.items())
             if not k.startswith(MODEL_STATE_PREFIX)]
    state = sum(k.startswith(MODEL_STATE_PREFIX) for k in specs)
    if state:
        shown.append(f"{MODEL_STATE_PREFIX}* ({state} tensors)")
    return ", ".join(shown)


def _print_signatures(version_dir: str) -> None:
    from t2t.serving import export as export_lib

    with open(os.path.join(version_dir, "assets.extra", export_lib.EXPORT_INFO_FILE),
              encoding="utf-8") as f:
        info = json.load(f)
    print("Signatures:")
    for name, signature in sorted(info["signatures"].items()):
        print(f"  {name}: ({_show_specs(signature['inputs'])}) -> "
              f"({_show_specs(signature['outputs'])})")
    if info.get("needs_tensorflow_text"):
        print("The text signature uses tensorflow_text ops: `import tensorflow_text` before "
              "loading (TF Serving includes them).")
    if info.get("ids_only_export"):
        print(f"Exported (ids in/out, stock TF ops, no tensorflow_text): "
              f"{info['ids_only_export']}")
    parity = info.get("parity")
    if parity:
        print(f"Parity check passed on {parity['examples']} decodes"
              f"{' (sampling: outputs not compared)' if parity['sampling'] else ''}.")
    else:
        print("Parity check skipped.")


def _export_format(export_config: config.ExportConfig, problem, model_name: str, hparams,
                   data_dir: str, checkpoint: str, export_dir: str, dhp) -> None:
    """--format=keras / tflite / ctranslate2: each writes EXPORT_DIR/<version>/ and says
    what it wrote."""
    if export_config.format == "ctranslate2":
        from t2t.serving import ctranslate2_export

        quantization = FLAGS.quantization or "float32"
        print(f"Exporting {model_name} on {problem.name} from {checkpoint} as CTranslate2 "
              f"({quantization}) to {export_dir}", flush=True)
        version_dir = ctranslate2_export.export_ctranslate2(
            problem, model_name, hparams, data_dir, checkpoint, export_dir, dhp,
            quantization=quantization, parity_check=not export_config.skip_parity_check,
            parity_examples=export_config.parity_examples)
        report = ctranslate2_export.report_lines(version_dir)
    elif export_config.format == "keras":
        from t2t.serving import keras_export

        print(f"Exporting {model_name} on {problem.name} from {checkpoint} as Keras files "
              f"to {export_dir}", flush=True)
        version_dir = keras_export.export_keras(problem, model_name, hparams, data_dir,
                                                checkpoint, export_dir)
        report = keras_export.report_lines(version_dir)
    else:
        from t2t.serving import tflite_export

        print(f"Exporting {model_name} on {problem.name} from {checkpoint} as LiteRT "
              f"({dhp.to_string()}) to {export_dir}", flush=True)
        version_dir = tflite_export.export_tflite(
            problem, model_name, hparams, data_dir, checkpoint, export_dir, dhp,
            parity_check=not export_config.skip_parity_check,
            parity_examples=export_config.parity_examples)
        report = tflite_export.report_lines(version_dir)
    print(f"Exported: {version_dir}")
    print("\n".join(report), flush=True)


def main(argv: list[str]) -> None:
    if not FLAGS.registry_help:  # the flag given, before TensorFlow starts
        output_paths.check_given(dirs=("export_dir",))
    if not common_flags.start(argv):
        return
    from t2t import registry
    from t2t.data import multi_problem
    from t2t.data import problem as problem_lib
    from t2t.decoding import decoder as decoder_lib
    from t2t.hparams.hparams import HParamsError, MissingHParamError
    from t2t.serving import export as export_lib

    task = config_flags.build(config.TaskConfig)
    try:
        output_dir = os.path.expanduser(task.output_dir) if task.output_dir else None
        problem_name, model_name, hparams_set, hparams = common_flags.resolve_run(
            output_dir, task.problem, task.model, task.hparams_set, task.hparams)
        if output_dir is None:
            output_dir = common_flags.default_run_dir(problem_name, model_name, hparams_set)
        data_dir = common_flags.resolve_data_dir(task.data_dir, output_dir)
        dhp = config.DecodeHParams.parse(FLAGS.decode_hparams)
        problem = multi_problem.select_task(registry.problem(problem_name), FLAGS.decode_task)
        registry.model(model_name)
        checkpoint, members = ensemble_flags.resolve_checkpoints(output_dir)
        export_config = config_flags.build(config.ExportConfig)
        ensemble_flags.check_export_format(export_config.format, members)
        if FLAGS.quantization and export_config.format != "ctranslate2":
            common_flags.fail(f"--quantization={FLAGS.quantization} applies to "
                              f"--format=ctranslate2, not --format={export_config.format}: "
                              f"drop it or pass --format=ctranslate2.")
        default_dir = ("export" if export_config.format == "saved_model"
                       else f"export_{export_config.format}")
        export_dir = os.path.expanduser(export_config.export_dir
                                        or os.path.join(output_dir, default_dir))
        output_paths.check_dir("export_dir", export_dir)  # given, gin's or the default
        common_flags.print_locations(data_dir, output_dir)
        if export_config.format != "saved_model":
            _export_format(export_config, problem, model_name, hparams, data_dir, checkpoint,
                           export_dir, dhp)
            return
        print(f"Exporting {model_name} on {problem_name} from {checkpoint} "
              f"({dhp.to_string()}) to {export_dir}", flush=True)
        ensemble = (ensemble_flags.load_models(problem, members, model_name, hparams, data_dir)
                    if len(members) > 1 else None)  # one model: export loads it
        version_dir = export_lib.export(
            problem, model_name, hparams, data_dir, checkpoint, export_dir, dhp,
            parity_check=not export_config.skip_parity_check,
            text_signature=not export_config.ids_only,
            parity_examples=export_config.parity_examples, model=ensemble,
        )
        print(f"Exported: {version_dir}")
        _print_signatures(version_dir)
        sys.stdout.flush()
    except (registry.UnknownNameError, HParamsError, MissingHParamError, problem_lib.DataMissingError,
            decoder_lib.DecodeError, export_lib.ExportError, FileNotFoundError,
            ImportError, multi_problem.TaskChoiceError) as e:
        common_flags.fail(str(e))
    except KeyboardInterrupt:
        sys.exit(130)


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-exporter")
    flag_help.run(main, __doc__, hidden=("data_mirror",))


if __name__ == "__main__":
    run()
