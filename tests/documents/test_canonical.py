import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from git_genjob.documents.canonical import canonical_bytes, digest, format_time, parse_strict, parse_time
from git_genjob.documents.errors import BadInput

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


def test_canonical_form_sorts_keys_and_keeps_utf8() -> None:
    assert canonical_bytes({"b": 1, "a": "é", "A": [True, None]}) == '{"A":[true,null],"a":"é","b":1}'.encode()


def test_keys_sort_by_code_point_which_is_utf8_byte_order() -> None:
    keys = ["\uffff", "\U0001f600", "z", "é"]
    doc = canonical_bytes(dict.fromkeys(keys, 0))
    order = list(json.loads(doc))
    assert order == sorted(keys, key=lambda k: k.encode("utf-8"))


def test_floats_are_refused() -> None:
    with pytest.raises(BadInput, match="no floats"):
        canonical_bytes({"x": 1.5})


@given(json_values)
def test_roundtrip_is_stable(value: object) -> None:
    data = canonical_bytes(value)
    assert canonical_bytes(parse_strict(data)) == data


@pytest.mark.parametrize("text", ['{"a":1,"a":2}', '{"a":1.0}', '{"a":NaN}', "[1,", "\xff"])
def test_strict_parse_refuses(text: str) -> None:
    with pytest.raises(BadInput):
        parse_strict(text.encode("latin-1") if text == "\xff" else text.encode())


def test_digest_and_time_forms() -> None:
    assert digest(b"") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert format_time(1796221643.0) == "2026-12-02T14:27:23.000Z"
    assert parse_time("2026-12-02T14:27:23.250Z") == 1796221643.25
