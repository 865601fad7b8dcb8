"""The fast paths' one memo (storage/memo.py, issue 36 step 3): the properties every fast command
shares, each checked on every command that declares it, and the memo's own rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_genjob.storage.fastrefs import repo_dirs
from git_genjob.storage.layout import ARCHIVE_REF
from git_genjob.storage.memo import Memo, key_args, served, window
from tests.helpers.common import git, run_genjob, setup_worker
from tests.landing.test_verify_fast import done
from tests.planner.test_status_fast import probe

# Each fast command (its arguments, KEY standing for a finished job's key), and whether the work
# tree's trust store is in its stamp.
COMMANDS = {
    "status": (["status"], True),
    "status --json": (["status", "--json"], True),
    "show": (["show", "KEY"], False),
    "verify": (["verify", "KEY"], True),
    "log": (["log"], False),
}


def _served(repo: Path, name: str) -> list[str]:
    """A repository with one finished job whose `name` the slow path decided, then served."""
    key = setup_worker(repo)
    k = done(repo, key)
    args = [k if a == "KEY" else a for a in COMMANDS[name][0]]
    got, out, mods = probe(repo, *args)
    assert got == 0 and "pygit2" in mods, (args, out)
    assert probe(repo, *args) == (0, out, set())  # served without libgit2 (or click)
    return args


@pytest.mark.parametrize("name", COMMANDS)
def test_a_moved_archive_ref_sends_every_fast_command_the_slow_way(repo: Path, name: str) -> None:
    args = _served(repo, name)
    git(repo, "update-ref", ARCHIVE_REF, git(repo, "rev-parse", "HEAD").strip())
    assert "pygit2" in probe(repo, *args)[2]


@pytest.mark.parametrize("name", COMMANDS)
def test_a_linked_worktree_takes_the_slow_path(repo: Path, tmp_path: Path, name: str) -> None:
    args = _served(repo, name)
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    assert repo_dirs(str(linked)) is None
    assert "pygit2" in probe(linked, *args)[2]


@pytest.mark.parametrize("name", [n for n, (_, trust) in COMMANDS.items() if trust])
def test_a_trust_change_in_the_work_tree_sends_the_command_the_slow_way(repo: Path, name: str) -> None:
    args = _served(repo, name)
    assert run_genjob("trust", "revoke", "w1", cwd=repo).code == 0  # uncommitted: the work tree's store
    assert "pygit2" in probe(repo, *args)[2]


# -- the memo's own rules -----------------------------------------------------------------------
STAMP = {"head": "a" * 40, "archive": "", "config": "1:2:3"}


def test_a_memo_holds_while_its_stamp_and_fields_hold(tmp_path: Path) -> None:
    memo = Memo(str(tmp_path / "genjob" / "m"))
    assert memo.read(STAMP) is None  # none yet
    memo.write(STAMP, key="k", text="plain\n", json="{}\n")
    record = memo.read(STAMP, key="k")
    assert record is not None and served(record, False) == "plain\n" and served(record, True) == "{}\n"
    assert memo.read(None) is None and memo.read(STAMP, key="other") is None


@pytest.mark.parametrize("part", STAMP)
def test_any_stamped_move_invalidates_the_memo(tmp_path: Path, part: str) -> None:
    memo = Memo(str(tmp_path / "m"))
    memo.write(STAMP, text="x")
    assert memo.read({**STAMP, part: STAMP[part] + "0"}) is None
    assert memo.read({k: v for k, v in STAMP.items() if k != part}) is None


def test_a_memo_of_another_version_is_not_read_and_a_damaged_one_raises(tmp_path: Path) -> None:
    path = tmp_path / "m"
    path.write_text(json.dumps({"v": 2, "stamp": STAMP, "text": "x"}))
    assert Memo(str(path)).read(STAMP) is None
    path.write_text("{")
    with pytest.raises(ValueError):
        Memo(str(path)).read(STAMP)  # the fast path's catch-all sends it the slow way


@pytest.mark.parametrize("edges", [[], [1e12], [1.0], [1.0, 1e12]])
def test_a_memo_holds_inside_its_window_only(tmp_path: Path, edges: list[float]) -> None:
    import time

    memo = Memo(str(tmp_path / "m"))
    memo.write(STAMP, **window(edges, time.time()), text="x")  # a trusted key's edges, before and after now
    assert memo.read(STAMP) is not None
    memo.write(STAMP, until=time.time() - 1, since=None, text="x")  # an edge has passed
    assert memo.read(STAMP) is None
    memo.write(STAMP, until=None, since=time.time() + 3600, text="x")  # the clock went back over one
    assert memo.read(STAMP) is None


def test_the_key_grammar_takes_json_on_either_side() -> None:
    assert key_args(["show", "k", "--json"], "show") == key_args(["show", "--json", "k"], "show") == ("k", True)
    assert key_args(["show", "k"], "show") == ("k", False)
    assert key_args(["show"], "show") is None and key_args(["show", "a", "b"], "show") is None
