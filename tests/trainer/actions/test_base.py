"""LoopAction's defaults and the one set of gradient groups a training step computes."""

import pytest

from t2t.trainer.actions import base


class _Groups(base.LoopAction):
    def __init__(self, names):
        self.gradient_groups = (names, [0] * len(names))


def test_an_action_does_nothing_where_it_does_not_override():
    action = base.LoopAction()
    assert action.start(["loss"]) == [] and action.after_eval(None) is None
    assert action.before_step(3, True) is None and action.after_log(3, [1.0]) is None
    assert not (action.saves_evaluated_steps or action.decodes)


def test_one_action_may_ask_for_gradient_groups():
    assert base.gradient_groups([base.LoopAction()]) is None
    asking = _Groups(["encoder"])
    assert base.gradient_groups([base.LoopAction(), asking]) == (["encoder"], [0])
    with pytest.raises(ValueError, match="_Groups, _Groups all ask for gradient groups"):
        base.gradient_groups([asking, _Groups(["decoder"])])
