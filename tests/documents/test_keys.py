"""Signing keys (documents/keys.py, `git genjob keygen`)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.common import (
    run_genjob,
)


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_keygen_name_cannot_leave_the_keys_folder(repo: Path, hermetic_seal: Path) -> None:
    res = run_genjob("keygen", "--name", "../x", cwd=repo)
    assert res.code == 2 and "not a plain name" in res.err
    assert not (hermetic_seal / ".config/git-genjob/x").exists()
    assert sorted(p.name for p in (hermetic_seal / ".config/git-genjob/keys").iterdir()) == ["planner", "planner.pub"]
