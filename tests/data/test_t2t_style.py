"""Tests of t2t.data.t2t_style and the Problem dispatch to it: Tensor2Tensor's
hparams(defaults, model_hparams), reading-spec tuples, item decoders, was_copy, metric
names, VocabType.TOKEN and the generator_utils helpers T2T problems call."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest
import tensorflow as tf

from t2t.data import problem, t2t_style
from t2t.data.bases import text_problems
from t2t.data.encoders.subword_encoder import SubwordTextEncoder
from t2t.data.generation import generator_utils
from t2t.problems.algorithmic_tasks import algorithmic
from t2t.utils import metrics as metric_names
from tests.helpers.local_http import serve_folder


class _Reverse(algorithmic.AlgorithmicReverseBinary40Test):
    """A registered-style algorithmic problem, unregistered here."""

    registered_name = "zz_t2t_style_reverse"


class _T2tHparams(_Reverse):
    def hparams(self, defaults, unused_model_hparams):
        defaults.modality = {"inputs": "symbol", "targets": "symbol"}
        defaults.vocab_size = {"inputs": 4, "targets": 5}
        defaults.input_space_id = problem.SpaceID.DIGIT_0
        defaults.target_space_id = problem.SpaceID.DIGIT_1
        defaults.loss_multiplier = 2.0


class _SuperChain(_Reverse):
    def hparams(self, defaults, model_hparams):
        super().hparams(defaults, model_hparams)  # t2t's description, T2T's way
        defaults.stop_at_eos = True


def test_t2t_hparams_override_gives_problem_hparams():
    hp = _T2tHparams().hparams(None)
    assert hp.modality == {"inputs": "symbol", "targets": "symbol"}
    assert hp.vocab_size == {"inputs": 4, "targets": 5}
    assert (hp.input_space_id, hp.target_space_id, hp.loss_multiplier) == (10, 11, 2.0)
    reversed_hp = _T2tHparams(was_reversed=True).hparams(None)
    assert reversed_hp.vocab_size == {"inputs": 5, "targets": 4}
    copied = _T2tHparams(was_copy=True).hparams(None)
    assert copied.vocab_size == {"inputs": 4, "targets": 4} and copied.target_space_id == 10
    assert _T2tHparams(was_copy=True).was_copy


def test_super_hparams_fills_the_bag_from_t2ts_description():
    hp = _SuperChain().hparams(None)
    assert hp.vocab_size == {"inputs": 4, "targets": 4} and hp.stop_at_eos
    bag = t2t_style.default_problem_hparams()
    assert _Reverse().hparams(bag, None) is None and bag.modality["targets"] == "symbol"


def test_bad_t2t_hparams_are_named():
    class Empty(_Reverse):
        def hparams(self, defaults, model_hparams):
            pass

    class NoVocab(_Reverse):
        def hparams(self, defaults, model_hparams):
            defaults.modality = {"targets": "symbol"}

    class Video(_Reverse):
        def hparams(self, defaults, model_hparams):
            defaults.modality = {"targets": "video"}
            defaults.vocab_size = {"targets": 256}

    class Returns(_Reverse):
        def hparams(self, defaults, model_hparams):
            return defaults

    with pytest.raises(ValueError, match="left defaults.modality empty"):
        Empty().hparams(None)
    with pytest.raises(ValueError, match=r"no entry for \['targets'\]"):
        NoVocab().hparams(None)
    with pytest.raises(ValueError, match="'video', which t2t does not implement.*symbol"):
        Video().hparams(None)
    with pytest.raises(ValueError, match="return None"):
        Returns().hparams(None)
    bag = t2t_style.default_problem_hparams()
    with pytest.raises(ValueError, match="already exists"):
        bag.add_hparam("modality", {})
    with pytest.raises(ValueError, match="add it with add_hparam"):
        bag.set_hparam("no_such", 1)


class _TupleSpec(_Reverse):
    """Examples of a PNG and a label, read T2T's way."""

    def example_reading_spec(self):
        decoders = t2t_style.slim().tfexample_decoder
        fields = {"image/encoded": tf.io.FixedLenFeature((), tf.string),
                  "image/format": tf.io.FixedLenFeature((), tf.string),
                  "shape": tf.io.FixedLenFeature([2], tf.int64),
                  "values": tf.io.VarLenFeature(tf.float32),
                  "label": tf.io.FixedLenFeature([1], tf.int64)}
        return fields, {"inputs": decoders.Image(channels=1),
                        "grid": decoders.Tensor("values", shape_keys="shape"),
                        "targets": decoders.Tensor("label")}

    def preprocess_example(self, example, mode, hparams):
        if mode == tf.estimator.ModeKeys.TRAIN:  # T2T's spelling of the mode
            example["grid"] = example["grid"] * 2.0
        return example


def _write_tuple_examples(data_dir: str) -> list[np.ndarray]:
    images = [np.full([3, 2, 1], 10 * i, np.uint8) for i in range(4)]
    pngs = [tf.io.encode_png(image).numpy() for image in images]
    cases = [{"image/encoded": png, "image/format": b"png", "shape": [2, 3],
              "values": [float(i)] * 6, "label": [i % 2]} for i, png in enumerate(pngs)]
    generator_utils.generate_files(cases, _TupleSpec().training_filepaths(data_dir, 1, False))
    return images


def test_reading_spec_tuples_and_item_decoders(tmp_path):
    from tensor2tensor.data_generators import problem as t2t_problem  # noqa: F401

    import t2t  # noqa: F401  (tf.estimator.ModeKeys for code written for T2T)

    images = _write_tuple_examples(str(tmp_path))
    examples = list(_TupleSpec().dataset("train", str(tmp_path), shuffle_files=False,
                                         deterministic=True).as_numpy_iterator())
    assert len(examples) == 4
    for i, example in enumerate(examples):
        np.testing.assert_array_equal(example["inputs"], images[i])
        assert example["grid"].shape == (2, 3) and np.all(example["grid"] == 2.0 * i)
        assert example["targets"].tolist() == [i % 2] and example["targets"].dtype == np.int32


def test_preprocess_example_may_return_a_dataset(tmp_path):
    class Split(_Reverse):  # one example becomes one per target token (T2T allowed this)
        def preprocess_example(self, example, mode, hparams):
            return tf.data.Dataset.from_tensor_slices({"targets": example["targets"][:, None]})

    prob = Split()
    generator_utils.generate_files([{"inputs": [3, 4, 1], "targets": [4, 3, 1]}],
                                   prob.training_filepaths(str(tmp_path), 1, False))
    got = [e["targets"].tolist() for e in prob.dataset("train", str(tmp_path)).as_numpy_iterator()]
    assert got == [[4], [3], [1]]
    example = {"inputs": tf.constant([1, 2, 3]), "targets": tf.constant([4, 5, 6])}
    hparams = t2t_style.ProblemHParamsBag(max_input_seq_length=2, max_target_seq_length=0)
    out = problem.preprocess_example_common(example, "train", hparams)
    assert out["inputs"].numpy().tolist() == [1, 2] and out["targets"].numpy().tolist() == [4, 5, 6]


def test_was_copy_copies_inputs_to_targets(tmp_path):
    generator_utils.generate_files([{"inputs": [3, 4, 1], "targets": [4, 3, 1]}],
                                   _Reverse().training_filepaths(str(tmp_path), 1, False))
    example = next(_Reverse(was_copy=True).dataset("train", str(tmp_path)).as_numpy_iterator())
    assert example["targets"].tolist() == example["inputs"].tolist() == [3, 4, 1]
    both = next(_Reverse(was_reversed=True, was_copy=True).dataset(
        "train", str(tmp_path)).as_numpy_iterator())
    assert both["inputs"].tolist() == both["targets"].tolist() == [4, 3, 1]


def test_t2t_metric_names_map_or_fail_early():
    class Translation(_Reverse):
        def eval_metrics(self):
            return [metric_names.Metrics.ACC, metric_names.Metrics.APPROX_BLEU,
                    metric_names.Metrics.ROUGE_L_F, metric_names.Metrics.IMAGE_SUMMARY]

    class Sari(_Reverse):
        def eval_metrics(self):
            return [metric_names.Metrics.APPROX_SARI]

    assert Translation().eval_metrics() == ["accuracy", "bleu", "rouge_l"]
    with pytest.raises(metric_names.UnsupportedMetricError, match="approx_sari_score.*use"):
        Sari().eval_metrics()
    assert metric_names.canonical_metric_names(["rmse", "rmse", "accuracy"]) == ["rmse", "accuracy"]


def test_algorithmic_generator_with_t2ts_three_arguments():
    class Sums(algorithmic.AlgorithmicProblem):
        registered_name = "zz_t2t_style_sums"
        num_symbols, train_length, dev_length, train_size, dev_size = 10, 5, 5, 30, 5

        def generator(self, nbr_symbols, max_length, nbr_cases):
            import random

            for _ in range(nbr_cases):
                inputs = [random.randrange(nbr_symbols) for _ in range(random.randint(1, max_length))]
                yield {"inputs": inputs, "targets": [sum(inputs) % nbr_symbols]}

    first = list(Sums().generate_examples("", "", "train"))
    assert len(first) == 30 and first == list(Sums().generate_examples("", "", "train"))
    assert first != list(Sums().generate_examples("", "", "dev"))[:30]
    assert all(case["inputs"][-1] == 1 and len(case["inputs"]) <= 6 for case in first)


def test_vocab_type_token_reads_the_token_file(tmp_path):
    class Tokens(text_problems.Text2TextProblem):
        registered_name = "zz_t2t_style_tokens"
        vocab_type = text_problems.VocabType.TOKEN
        oov_token = "<UNK>"

        def generate_samples(self, data_dir, tmp_dir, dataset_split):
            yield {"inputs": "a b zz", "targets": "b a"}

    prob = Tokens()
    with pytest.raises(FileNotFoundError, match="vocab.zz_t2t_style_tokens.tokens"):
        prob.get_or_create_vocab(str(tmp_path), str(tmp_path))
    (tmp_path / "vocab.zz_t2t_style_tokens.tokens").write_text("<pad>\n<EOS>\na\nb\n<UNK>\n")
    encoder = prob.get_or_create_vocab(str(tmp_path), str(tmp_path))
    assert encoder.encode("a b zz") == [2, 3, 4]
    assert prob.vocab_filename == "vocab.zz_t2t_style_tokens.tokens"


def test_vocab_type_subword_builds_t2ts_file(tmp_path):
    class Subwords(text_problems.Text2SelfProblem):
        registered_name = "zz_t2t_style_subwords"
        vocab_type = text_problems.VocabType.SUBWORD
        approx_vocab_size = 60

        def generate_samples(self, data_dir, tmp_dir, dataset_split):
            for line in ("the cat sat on the mat", "the dog sat on the log") * 5:
                yield {"targets": line}

    encoder = Subwords().get_or_create_vocab(str(tmp_path), str(tmp_path))
    assert isinstance(encoder, SubwordTextEncoder)
    assert (tmp_path / "vocab.zz_t2t_style_subwords.60.subwords").exists()
    assert encoder.decode(encoder.encode("the cat sat")) == "the cat sat"


def test_generator_utils_download_gunzip_and_vocab(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    text = "Return the number of items in the queue.\nCreate a new list.\n" * 20
    with gzip.open(served / "corpus.txt.gz", "wt") as f:
        f.write(text)
    with serve_folder(str(served)) as (url, requested):
        path = generator_utils.maybe_download(str(tmp_path / "tmp"), "corpus.txt.gz",
                                              url + "corpus.txt.gz")
        assert requested == ["/corpus.txt.gz"]
        assert generator_utils.maybe_download(str(tmp_path / "tmp"), "corpus.txt.gz",
                                              url + "corpus.txt.gz") == path
        assert requested == ["/corpus.txt.gz"]  # present: not fetched again
        generator_utils.gunzip_file(path, str(tmp_path / "corpus.txt"))
        assert (tmp_path / "corpus.txt").read_text() == text
        encoder = generator_utils.get_or_generate_vocab(
            str(tmp_path / "data"), str(tmp_path / "tmp2"), "vocab.test.50.subwords", 50,
            [[url + "corpus.txt.gz", ["corpus.txt"]]])
    assert os.path.exists(tmp_path / "data" / "vocab.test.50.subwords")
    assert encoder.decode(encoder.encode("Create a new list.")) == "Create a new list."
    again = generator_utils.get_or_generate_vocab_inner(
        str(tmp_path / "data"), "vocab.test.50.subwords", 50, iter(()))
    assert again.all_subtoken_strings == encoder.all_subtoken_strings
    assert generator_utils.train_data_filenames("p", "/d", 2) == [
        "/d/p-train-00000-of-00002", "/d/p-train-00001-of-00002"]


def test_copy_suffix_and_t2ts_accessors():
    from t2t import registry

    prob = registry.problem("algorithmic_reverse_binary40_test_copy")
    assert prob.was_copy and not prob.was_reversed
    assert prob.name == "algorithmic_reverse_binary40_test_copy"
    assert prob.dataset_filename() == "algorithmic_reverse_binary40_test"
    both = registry.problem("algorithmic_reverse_binary40_test_rev_copy")
    assert both.was_copy and both.was_reversed
    assert registry.problem("algorithmic_reverse_binary40_test_copy_rev").was_copy
    with pytest.raises(registry.BadProblemNameError, match="copies twice"):
        registry.problem("algorithmic_reverse_binary40_test_copy_copy")
    assert prob.get_hparams().vocab_size["targets"] == 4 and prob.has_inputs
    assert set(prob.get_feature_encoders()) == {"inputs", "targets"}
    assert _TupleSpec().has_inputs  # its item decoders name "inputs"


def test_t2ts_txt_and_tabbed_vocab_helpers_and_dataset_keywords(tmp_path):
    (tmp_path / "pairs.tsv").write_text("Return the item.\tla\nCreate a list.\tlb\n" * 10)
    (tmp_path / "a.txt").write_text("Return the item.\nCreate a list.\n" * 10)
    tabbed = generator_utils.get_or_generate_tabbed_vocab(
        str(tmp_path / "d1"), str(tmp_path), "pairs.tsv", 0, "vocab.t.40.subwords", 40)
    plain = generator_utils.get_or_generate_txt_vocab(
        str(tmp_path / "d2"), "vocab.p.40.subwords", 40, str(tmp_path / "*.txt"))
    assert tabbed.all_subtoken_strings == plain.all_subtoken_strings  # the same texts
    assert "la" not in "".join(tabbed.all_subtoken_strings)  # column 0 only
    prob = _Reverse()
    generator_utils.generate_files([{"inputs": [3, 1], "targets": [4, 1]}] * 5,
                                   prob.dev_filepaths(str(tmp_path), 1, False))
    examples = list(prob.dataset("train", str(tmp_path), dataset_split="eval", max_records=3,
                                 preprocess=False, num_threads=4).as_numpy_iterator())
    assert len(examples) == 3
    with pytest.raises(TypeError, match="unexpected keyword.*'no_such'"):
        prob.dataset("train", str(tmp_path), no_such=1)


def test_a_t2t_hparams_override_reads_self_encoders_and_model_hparams():
    class ReadsEncoders(_Reverse):
        def hparams(self, defaults, model_hparams):
            size = self._encoders["inputs"].vocab_size
            defaults.modality = {"inputs": "symbol", "targets": "symbol"}
            defaults.vocab_size = {"inputs": size, "targets": size}
            assert model_hparams.get("max_input_seq_length") == 0

    assert ReadsEncoders().hparams(None).vocab_size == {"inputs": 4, "targets": 4}


def test_data_mirror_reaches_maybe_download(tmp_path):
    """--data_mirror (generate_data's mirror) serves T2T code that calls maybe_download."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "lines.txt").write_text("Return the item.\nCreate a list.\n")

    class Downloads(text_problems.Text2SelfProblem):
        registered_name = "zz_t2t_style_downloads"
        vocab_type = text_problems.VocabType.CHARACTER

        def generate_samples(self, data_dir, tmp_dir, dataset_split):
            path = generator_utils.maybe_download(tmp_dir, "lines.txt",
                                                  "http://127.0.0.1:9/lines.txt")
            for line in open(path):
                yield {"targets": line.strip()}

    summary = Downloads().generate_data(str(tmp_path / "data"), str(tmp_path / "tmp"),
                                        mirror=str(mirror), progress=False)
    assert summary["train"].examples == 2


def test_pack_dataset_is_t2ts_packing():
    examples = tf.data.Dataset.from_generator(
        lambda: iter([{"inputs": [5, 6, 1], "targets": [7, 1]}, {"inputs": [8, 1], "targets": [9, 1]}]),
        output_signature={"inputs": tf.TensorSpec([None], tf.int64),
                          "targets": tf.TensorSpec([None], tf.int64)})
    row = next(generator_utils.pack_dataset(examples, 8).as_numpy_iterator())
    assert row["inputs"].tolist() == [5, 6, 1, 8, 1, 0, 0, 0]
    assert row["inputs_segmentation"].tolist() == [1, 1, 1, 2, 2, 0, 0, 0]
    assert row["targets_position"].tolist()[:4] == [0, 1, 0, 1]
