"""The repository configuration (documents/config.py): a malformed value is exit 2 naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.common import (
    refs,
    run_genjob,
)


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
@pytest.mark.parametrize(
    "text, names",
    [("limits = 5\n", "limits must be a table"), ("[commit]\ndisclosure = 'A\\nB'\n", "commit.disclosure")],
)
def test_malformed_config_is_exit_2_naming_the_key(repo: Path, text: str, names: str) -> None:
    assert run_genjob("init", cwd=repo).code == 0
    (repo / ".genjob/config.toml").write_text(text)
    before = refs(repo)
    res = run_genjob("submit", "-m", "x", "src/user.py", cwd=repo)
    assert res.code == 2 and names in res.err, res.err
    assert refs(repo) == before
