import pytest

from git_genjob.documents.errors import BadInput
from git_genjob.documents.job import Job, check_key, default_key, describe_difference

A = "sha256:" + "a" * 64
B = "sha256:" + "b" * 64


def test_same_work_order_same_key_and_digest() -> None:
    one = Job.mint("do it", {"b.py": A, "a.py": None}, None)
    two = Job.mint("do it", {"a.py": None, "b.py": A}, None)
    assert one.key == two.key == default_key("do it", {"a.py": None, "b.py": A})
    assert one.digest == two.digest and one.allowed_paths == ["a.py", "b.py"]


def test_digest_covers_meaning_only() -> None:
    assert Job.mint("x", {"a": A}, "k").digest != Job.mint("y", {"a": A}, "k").digest
    assert Job.mint("x", {"a": A}, "k").digest != Job.mint("x", {"a": B}, "k").digest


def test_roundtrip_through_stored_bytes() -> None:
    job = Job.mint("é instruction", {"src/a.py": A, "new.py": None}, "op-1")
    assert Job.from_bytes(job.canonical()) == job


@pytest.mark.parametrize("key", ["", "A", "-x", "a..b", "x.", "x.lock", "a/b", "a" * 129, "a b"])
def test_bad_keys(key: str) -> None:
    with pytest.raises(BadInput):
        check_key(key)


def test_difference_names_fields() -> None:
    old = Job.mint("x", {"a": A, "b": A}, "k")
    new = Job.mint("y", {"a": B, "c": None}, "k")
    assert describe_difference(old, new) == [
        "instruction differs",
        "allowed paths added: c",
        "allowed paths removed: b",
        f"input a changed from {A} to {B}",
    ]


@pytest.mark.parametrize(
    "doc",
    [
        b'{"schema":"genjob.job/v2","instruction":"x","allowed_paths":["a"],"inputs":{"a":null},"key":"k"}',
        b'{"schema":"genjob.job/v1","instruction":"x","allowed_paths":["b","a"],"inputs":{"a":null,"b":null},"key":"k"}',
        b'{"schema":"genjob.job/v1","instruction":"x","allowed_paths":["a"],"inputs":{"a":"md5:1"},"key":"k"}',
        b'{"schema":"genjob.job/v1","instruction":"x","allowed_paths":["../a"],"inputs":{"../a":null},"key":"k"}',
        b'{"schema":"genjob.job/v1","instruction":"x","allowed_paths":["a"],"inputs":{"a":null},"key":"k","x":1}',
    ],
)
def test_malformed_job_json_is_refused(doc: bytes) -> None:
    with pytest.raises(BadInput):
        Job.from_bytes(doc)
