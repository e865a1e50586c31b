"""Test order for `pytest -n 2`: the longest modules start first.

pytest-xdist (--dist=loadscope) hands out whole modules, so a module's fixtures are
built once; with --no-loadscope-reorder it hands them out in collection order. A long
module that started last would run alone at the end while the other worker idles (the
quick regression subset, ~7 min on 2 cores, did: 19% of CI's CPU time unused), so the
modules below, the longest as measured in a CI run, are moved to the front, longest
first. Any order stays correct: this only packs the two workers better.
"""

from __future__ import annotations

LONGEST_FIRST = (  # from `--durations=0` of a fresh-clone CI run (2026-11-27)
    "tests/docsite/test_docs_commands.py",  # #53: every docs page's commands, in order
    "tests/regression/test_cases_converge.py",
    "tests/parallel/test_mesh_training.py",  # ~9 min of mesh runs (#47: dropout on, 2 layouts)
    "tests/trainer/test_distributed.py",
    "tests/test_t2t_user_dir.py",  # #48: 4 T2T user problems x 3 binaries (~3 min)
    "tests/data/test_t2t_data_dir.py",
    "tests/bin/test_t2t_translate_all.py",  # #49: per-checkpoint decodes (~1.5 min)
    "tests/trainer/test_accumulation.py",
    "tests/decoding/test_ensemble.py",
    "tests/trainer/test_best_checkpoints.py",
    "tests/decoding/test_decode_options.py",
    "tests/data/pipeline/test_subword_sampling.py",
    "tests/trainer/test_decoded_evaluation.py",
    "tests/data/bases/test_text_problem_bases.py",
    "tests/data/bases/test_image_utils.py",
    "tests/trainer/test_trainer.py",
    "tests/serving/test_export.py",
    "tests/bin/test_run_record.py",
    "tests/bin/test_t2t_decoder.py",
    "tests/serving/test_tflite_export.py",
    "tests/tuning/test_tuner_cli.py",
    "tests/serving/test_lm_export.py",
    "tests/robustness/test_checkpoint_faults.py",
    "tests/robustness/test_faults.py",
    "tests/bin/test_t2t_trainer.py",
    "tests/serving/test_export_ids_only.py",
    "tests/serving/test_keras_export.py",
    "tests/bin/test_t2t_flag_compat.py",
    "tests/bin/test_t2t_decoder_lm.py",
    "tests/benchmarks/test_benchmarks_main.py",
    "tests/trainer/test_debugging.py",
)


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}

    def module_rank(item) -> int:
        return rank.get(item.nodeid.split("::", 1)[0], len(rank))

    items.sort(key=module_rank)  # stable: the order within a rank is pytest's


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """After a run that collected the docs command test: how many marked command blocks
    the docs have and how CI runs them (docsite.blocks)."""
    if not any("tests/docsite/test_docs_commands.py" in str(arg) or str(arg) in ("tests", ".")
               for arg in config.args) and config.args:
        return
    try:
        from docsite import __main__ as docsite_cli
        from docsite import blocks, runner
    except ImportError:
        return
    try:
        line = docsite_cli.count_line(blocks.all_blocks(runner.REPO / "docs"))
    except blocks.MarkerError as e:
        line = f"docs commands: cannot count: {e}"
    terminalreporter.write_line(line)
