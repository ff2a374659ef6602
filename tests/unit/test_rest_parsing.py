"""The shared JSON parsing of policy documents (coex.policy.load_json): every bad input is a
PolicyError with status 400 naming where, never a RecursionError or a UnicodeDecodeError."""

from __future__ import annotations

import json

import pytest

from coex.policy import MAX_JSON_DEPTH, PolicyError, Problem, json_depth_exceeds, load_json


@pytest.mark.parametrize("data", [
    b"[" * 100_000 + b"]" * 100_000,             # a RecursionError in json.loads
    b'{"a": ' * 50_000 + b"1" + b"}" * 50_000,
    b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1),
    b"[" * 100_000,                              # unterminated too
])
def test_deep_nesting_is_a_400_naming_the_body(data):
    with pytest.raises(PolicyError) as err:
        load_json(data)
    assert err.value.kind is Problem.MALFORMED and err.value.field == "body"
    assert "deeper" in err.value.message


def test_nesting_up_to_the_limit_parses():
    doc = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert load_json(doc.encode()) == json.loads(doc)


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"a": "[" * 1000, "b": '\\"{' * 100, "c": [["x"]]})
    assert not json_depth_exceeds(text, 3)
    assert load_json(text)["a"] == "[" * 1000


@pytest.mark.parametrize("data,word", [
    (b"{not json", "not JSON"), (b"\xff\xfe{}", "not UTF-8"), (b'{"a": 1', "not JSON"),
    (b'{"a": ' + b"9" * 5000 + b"}", "not JSON"),  # over Python's int digit limit: a ValueError
])
def test_malformed_bodies_are_400(data, word):
    with pytest.raises(PolicyError) as err:
        load_json(data, "body")
    assert err.value.kind is Problem.MALFORMED and err.value.field == "body" and word in err.value.message
