"""What problems and models share: reserved ids, modalities, ProblemHParams."""

from t2t import features


def test_reserved_ids():
    assert features.RESERVED_TOKENS[features.PAD_ID] == features.PAD
    assert features.RESERVED_TOKENS[features.EOS_ID] == features.EOS
    assert features.NUM_RESERVED_TOKENS == 2


def test_problem_hparams_reversed_swaps_inputs_and_targets():
    php = features.ProblemHParams(
        modality={"inputs": features.Modality.SYMBOL, "targets": features.Modality.CLASS_LABEL},
        vocab_size={"inputs": 10, "targets": 3}, input_space_id=2, target_space_id=5)
    assert php.is_classifier and php.has_inputs
    back = php.reversed()
    assert back.modality == {"targets": "symbol", "inputs": "class_label"}
    assert back.vocab_size == {"targets": 10, "inputs": 3}
    assert (back.input_space_id, back.target_space_id, back.was_reversed) == (5, 2, True)
    assert not back.is_classifier
    assert features.ProblemHParams.from_dict(php.to_dict()) == php
