"""refs/notes/genjob read and written by path, interoperating with git's own notes fan-out."""

from __future__ import annotations

from pathlib import Path

import pygit2

from git_genjob.storage.layout import NOTES_REF
from git_genjob.storage.notes import note_path, read_note, write_note
from git_genjob.storage.store import RefUpdate, Store
from tests.helpers.common import git


def _commits(repo: Path, n: int) -> list[str]:
    for i in range(n):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{i}")
    return git(repo, "rev-list", f"-{n}", "HEAD").split()


def test_notes_written_by_git_and_by_us_read_both_ways(repo: Path) -> None:
    a, b = _commits(repo, 2)
    git(repo, "notes", "--ref=genjob", "add", "-m", "from git", a)  # git writes it flat (no fan-out)
    store = Store.open(str(repo))
    assert read_note(store, a) == b"from git\n"
    write_note(store, pygit2.Oid(hex=b), b"from genjob\n")
    write_note(store, pygit2.Oid(hex=a), b"second line\n")  # extends git's note where it lies
    assert git(repo, "notes", "--ref=genjob", "show", b) == "from genjob\n"
    assert git(repo, "notes", "--ref=genjob", "show", a) == "from git\nsecond line\n"
    assert len(git(repo, "notes", "--ref=genjob", "list").splitlines()) == 2
    tree = store.get_commit(store.ref_target(NOTES_REF)).tree  # type: ignore[arg-type]
    assert note_path(tree, a) == a and note_path(tree, b) == f"{b[:2]}/{b[2:]}"
    git(repo, "fsck", "--strict")


def test_deep_fan_out_is_found_and_extended_in_place(repo: Path) -> None:
    (a,) = _commits(repo, 1)
    store = Store.open(str(repo))
    deep = f"{a[:2]}/{a[2:4]}/{a[4:]}"  # git's fan-out past 65,536 notes
    tree = store.tree_with(None, deep, store.blob(b"deep\n"))
    store.update_refs([RefUpdate(NOTES_REF, None, store.commit(tree, [], "n\n"))])
    assert git(repo, "notes", "--ref=genjob", "show", a) == "deep\n"
    assert read_note(store, a) == b"deep\n"
    write_note(store, pygit2.Oid(hex=a), b"more\n")
    tree_now = store.get_commit(store.ref_target(NOTES_REF)).tree  # type: ignore[arg-type]
    assert note_path(tree_now, a) == deep
    assert git(repo, "notes", "--ref=genjob", "show", a) == "deep\nmore\n"
    assert git(repo, "notes", "--ref=genjob", "list").split() == [
        git(repo, "rev-parse", f"{NOTES_REF}:{deep}").strip(),
        a,
    ]


def test_absent_note_and_absent_ref(repo: Path) -> None:
    (a,) = _commits(repo, 1)
    store = Store.open(str(repo))
    assert read_note(store, a) is None
    write_note(store, pygit2.Oid(hex=a), b"x\n")
    assert read_note(store, "0" * 40) is None
    assert read_note(store, a[:2] + "0" * 38) is None
