"""Tests of t2t.hparams.hparams.HParams: typed values and string overrides."""

from __future__ import annotations

import json

import pytest

from t2t.hparams.hparams import HParams, HParamsError


def make() -> HParams:
    return HParams(a=0, b=0.0, c="x", d=[0], flag=False, learning_rate=0.1, maybe=None)


# ------------------------------------------------------------------ attributes
def test_attribute_access_and_membership():
    hp = make()
    assert hp.a == 0 and hp.b == 0.0 and hp.c == "x" and hp.d == [0] and hp.maybe is None
    assert "a" in hp and "zz" not in hp
    assert list(hp) == sorted(["a", "b", "c", "d", "flag", "learning_rate", "maybe"])
    assert hp.get("a") == 0 and hp.get("zz", 7) == 7
    with pytest.raises(AttributeError, match="no hparam 'zz'"):
        _ = hp.zz


def test_setattr_adds_new_and_type_checks_existing():
    hp = make()
    hp.new_one = 5
    assert hp.new_one == 5
    hp.a = 3
    assert hp.a == 3
    with pytest.raises(HParamsError, match="'a'"):
        hp.a = "three"
    assert hp.a == 3


def test_add_hparam_refuses_existing_and_reserved_names():
    hp = make()
    with pytest.raises(HParamsError, match="already exists"):
        hp.add_hparam("a", 1)
    for reserved in ("values", "parse", "_private"):
        with pytest.raises(HParamsError, match="reserved"):
            hp.add_hparam(reserved, 1)


def test_tuple_values_are_stored_as_lists():
    assert HParams(t=(1, 2)).t == [1, 2]


def test_del_hparam():
    hp = make()
    hp.del_hparam("a")
    assert "a" not in hp
    hp.del_hparam("a")  # deleting twice is harmless


# ------------------------------------------------------------------ parse
def test_parse_mixed_overrides_keeps_types():
    hp = make().parse("a=1,b=0.5,c=name,d=[1,2]")
    assert hp.a == 1 and type(hp.a) is int
    assert hp.b == 0.5 and type(hp.b) is float
    assert hp.c == "name"
    assert hp.d == [1, 2] and all(type(v) is int for v in hp.d)


def test_parse_returns_self_and_empty_string_is_a_no_op():
    hp = make()
    assert hp.parse("") is hp
    assert hp.parse("   ") is hp
    assert hp == make()


def test_parse_tolerates_spaces():
    hp = make().parse(" a = 7 , c = hello ")
    assert hp.a == 7 and hp.c == "hello"


def test_int_is_accepted_for_a_float():
    hp = make().parse("b=2")
    assert hp.b == 2.0 and type(hp.b) is float


@pytest.mark.parametrize("text", ["a=0.5", "a=1.0", "a=1e3", "a=abc"])
def test_non_int_text_for_an_int_is_refused(text):
    with pytest.raises(HParamsError) as info:
        make().parse(text)
    message = str(info.value)
    assert "'a'" in message and "int" in message and repr(text.split("=")[1]) in message


@pytest.mark.parametrize("text, expected", [
    ("true", True), ("True", True), ("TRUE", True), ("1", True), ("yes", True),
    ("false", False), ("False", False), ("0", False), ("no", False),
])
def test_bool_parsing(text, expected):
    hp = HParams(flag=not expected).parse(f"flag={text}")
    assert hp.flag is expected


def test_bad_bool_is_refused():
    with pytest.raises(HParamsError, match="'flag' is a bool .*'maybe'"):
        make().parse("flag=maybe")


def test_bool_text_for_an_int_is_refused():
    with pytest.raises(HParamsError, match="'a'"):
        make().parse("a=true")


@pytest.mark.parametrize("text, expected", [
    ("c='hello world'", "hello world"),
    ('c="quoted"', "quoted"),
    ("c=plain", "plain"),
    ("c='", "'"),
    ("c='mixed\"", "'mixed\""),
    ("c=123", "123"),
])
def test_string_quoting(text, expected):
    assert make().parse(text).c == expected


def test_list_parsing():
    hp = make()
    assert hp.parse("d=[]").d == []
    assert hp.parse("d=[ 3 , 4 ,5 ]").d == [3, 4, 5]
    floats = HParams(f=[0.5]).parse("f=[1,2.5]")
    assert floats.f == [1.0, 2.5] and all(type(v) is float for v in floats.f)
    strings = HParams(s=["a"]).parse("s=[x,'y z']")
    assert strings.s == ["x", "y z"]


def test_commas_inside_brackets_do_not_split_overrides():
    hp = make().parse("d=[1,2,3],a=5,c=after")
    assert hp.d == [1, 2, 3] and hp.a == 5 and hp.c == "after"


def test_nested_lists_are_refused():
    with pytest.raises(HParamsError, match="'d'"):
        make().parse("d=[[1,2],[3]]")


def test_list_items_are_type_checked():
    with pytest.raises(HParamsError, match="'d'.*'x'"):
        make().parse("d=[1,x]")


def test_scalar_for_a_list_and_list_for_a_scalar_are_refused():
    with pytest.raises(HParamsError, match=r"'d' is a list .*\[a,b,...\]"):
        make().parse("d=5")
    with pytest.raises(HParamsError, match="'a' is an int, not a list"):
        make().parse("a=[1,2]")


def test_a_none_value_takes_the_type_of_the_override():
    assert make().parse("maybe=3").maybe == 3
    assert make().parse("maybe=0.25").maybe == 0.25
    assert make().parse("maybe=true").maybe is True
    assert make().parse("maybe=none").maybe is None
    assert make().parse("maybe=word").maybe == "word"
    assert make().parse("maybe='7'").maybe == "7"
    assert make().parse("maybe=[1,2]").maybe == [1, 2]


def test_unknown_key_names_it_and_suggests_close_matches():
    with pytest.raises(HParamsError) as info:
        make().parse("learning_rat=0.2")
    message = str(info.value)
    assert "Unknown hparam 'learning_rat'" in message
    assert "Did you mean: learning_rate" in message  # the closest first


def test_unknown_key_without_close_match_has_no_suggestion():
    with pytest.raises(HParamsError) as info:
        make().parse("zzzzzzzz=1")
    assert "'zzzzzzzz'" in str(info.value) and "Did you mean" not in str(info.value)


@pytest.mark.parametrize("text, fragment", [
    ("a", "Malformed hparams override 'a'"),
    ("a=1,,=2", "Malformed hparams override '=2'"),
    ("1a=2", "Malformed"),
    ("[1,2", "Unbalanced '['"),
    ("d=[1,2", "Unbalanced '['"),
    ("d=1,2]", "Unbalanced ']'"),
])
def test_malformed_overrides_are_refused(text, fragment):
    with pytest.raises(HParamsError) as info:
        make().parse(text)
    assert fragment in str(info.value)


def test_a_failed_parse_changes_nothing():
    hp = make()
    with pytest.raises(HParamsError):
        hp.parse("a=5,c=changed,b=not_a_float")
    assert hp == make()


def test_hparams_error_is_a_value_error():
    assert issubclass(HParamsError, ValueError)


# ------------------------------------------------------------------ values / json
def test_values_is_a_deep_copy():
    hp = make()
    values = hp.values()
    assert values == {"a": 0, "b": 0.0, "c": "x", "d": [0], "flag": False,
                      "learning_rate": 0.1, "maybe": None}
    values["d"].append(9)
    values["a"] = 100
    assert hp.d == [0] and hp.a == 0


def test_json_round_trip():
    hp = make().parse("a=3,d=[4,5],c='with space'")
    text = hp.to_json()
    assert json.loads(text) == hp.values()
    assert list(json.loads(text)) == sorted(hp.values())  # keys sorted
    again = HParams.from_json(text)
    assert again == hp
    assert type(again.b) is float and type(again.a) is int
    assert HParams.from_json(hp.to_json(indent=2)) == hp


def test_copy_is_independent():
    hp = make()
    other = hp.copy()
    other.d = [7, 8]
    other.a = 9
    assert hp.d == [0] and hp.a == 0
    assert other != hp


def test_equality():
    assert make() == make()
    assert make() != make().parse("a=1")
    assert make() != {"a": 0}


def test_override_from_dict():
    hp = make()
    assert hp.override_from_dict({"a": 2, "b": 3}) is hp
    assert hp.a == 2 and hp.b == 3.0 and type(hp.b) is float
    with pytest.raises(HParamsError, match="Unknown hparam 'nope'"):
        hp.override_from_dict({"nope": 1})


def test_repr_shows_values():
    assert repr(HParams(a=1)) == 'HParams({"a": 1})'


# ------------------------------------------------------------------ plain values only
@pytest.mark.parametrize("value", [lambda: 1, len, object(), {"a": 1}, {1, 2}, b"bytes"])
def test_non_plain_values_are_refused(value):
    with pytest.raises(HParamsError, match="plain value"):
        HParams(v=value)
    hp = make()
    with pytest.raises(HParamsError, match="plain value"):
        hp.add_hparam("v", value)
    with pytest.raises(HParamsError, match="plain value"):
        hp.set_hparam("maybe", value)
    with pytest.raises(HParamsError):
        hp.new_attr = value
    assert "v" not in hp and "new_attr" not in hp


def test_list_items_must_be_plain():
    with pytest.raises(HParamsError, match="list items"):
        HParams(v=[1, object()])
    with pytest.raises(HParamsError, match="list items"):
        HParams(v=[[1], [2]])


# ------------------------------------------------------------------ set_hparam
def test_set_hparam_type_checks():
    hp = make()
    hp.set_hparam("b", 2)
    assert hp.b == 2.0 and type(hp.b) is float
    hp.set_hparam("a", 4.0)  # an integral float is fine for an int
    assert hp.a == 4 and type(hp.a) is int
    with pytest.raises(HParamsError, match="'a' is an int; got the float 1.5"):
        hp.set_hparam("a", 1.5)
    with pytest.raises(HParamsError, match="'c' is a str .* got int 1"):
        hp.set_hparam("c", 1)
    with pytest.raises(HParamsError, match="'a' is an int"):
        hp.set_hparam("a", "1")
    with pytest.raises(HParamsError, match="'flag' is a bool"):
        hp.set_hparam("flag", 1)
    with pytest.raises(HParamsError, match="'a' is an int"):
        hp.set_hparam("a", True)
    with pytest.raises(HParamsError, match="'d' is a list"):
        hp.set_hparam("d", 3)
    with pytest.raises(HParamsError, match="Unknown hparam 'aa'"):
        hp.set_hparam("aa", 1)
    assert hp.a == 4


def test_set_hparam_accepts_none_and_lists():
    hp = make()
    hp.set_hparam("a", None)
    assert hp.a is None
    hp.set_hparam("d", (5, 6))
    assert hp.d == [5, 6]
    hp.set_hparam("maybe", "anything")
    assert hp.maybe == "anything"


# ------------------------------------------------------------------ diff
def test_diff():
    base = make()
    other = make().parse("a=2,c=y")
    other.add_hparam("extra", 1)
    base.add_hparam("only_base", True)
    assert base.diff(other) == {
        "a": (0, 2),
        "c": ("x", "y"),
        "extra": (None, 1),
        "only_base": (True, None),
    }
    assert list(base.diff(other)) == sorted(base.diff(other))
    assert make().diff(make()) == {}
