import pytest
from hypothesis import given
from hypothesis import strategies as st

from git_genjob.documents.errors import BadInput
from git_genjob.documents.paths import check_path, from_cli

UNSAFE = [
    "",
    "/etc/passwd",
    "../x",
    "a/../b",
    "a//b",
    "./a",
    "a/",
    ".git/config",
    "x/.GIT/y",
    "a\x00b",
    "a\nb",
    "a\\b",
    ".genjob/allowed_signers",
]


@pytest.mark.parametrize("path", UNSAFE)
def test_unsafe_paths_are_refused(path: str) -> None:
    with pytest.raises(BadInput):
        check_path(path)


@pytest.mark.parametrize("path", ["a", "src/user.py", ".github/x.yml", "dir.git/x", "é/ü.txt"])
def test_safe_paths_pass(path: str) -> None:
    assert check_path(path) == path


@given(st.text(min_size=1, max_size=40))
def test_accepted_paths_are_normalized_and_relative(path: str) -> None:
    try:
        check_path(path)
    except BadInput:
        return
    parts = path.split("/")
    assert not path.startswith("/") and ".." not in parts and "" not in parts and "." not in parts


def test_cli_paths_are_relative_to_cwd(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "sub").mkdir()
    assert from_cli("x.py", str(tmp_path / "sub"), str(tmp_path)) == "sub/x.py"
    assert from_cli("../y.py", str(tmp_path / "sub"), str(tmp_path)) == "y.py"
    with pytest.raises(BadInput, match="outside the repository"):
        from_cli("../../z", str(tmp_path / "sub"), str(tmp_path))
