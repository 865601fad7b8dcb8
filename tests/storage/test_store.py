"""Store's compare-and-swap (SPEC §3), as racing processes and leftover locks exercise it."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pygit2
import pytest

from git_genjob.documents.errors import Conflict, StaleLock
from git_genjob.storage.blobs import STREAM_ABOVE, blob_digests
from git_genjob.storage.store import RefUpdate, Store
from tests.helpers.common import git, raw_repo, refs

REF = "refs/genjob/jobs/race"


def _blob_commit(store: Store, text: str) -> pygit2.Oid:
    tb = raw_repo(store).TreeBuilder()
    tb.insert("f", store.blob(text.encode()), pygit2.enums.FileMode.BLOB)
    return store.commit(tb.write(), [], f"{text}\n")


def _create(path: str, n: int, start, results) -> None:  # type: ignore[no-untyped-def]
    store = Store.open(path)
    oid = _blob_commit(store, f"writer {n}")
    start.wait()
    try:
        store.update_refs([RefUpdate(REF, None, oid)])
        results.put((n, "won", str(oid)))
    except Conflict:
        results.put((n, "lost", str(oid)))


def test_racing_create_only_updates_have_exactly_one_winner(repo: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    for _ in range(3):
        git(repo, "update-ref", "-d", REF, check=False)
        start, results = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_create, args=(str(repo), n, start, results)) for n in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        outcomes = [results.get(timeout=5) for _ in procs]
        winners = [o for o in outcomes if o[1] == "won"]
        assert len(winners) == 1, outcomes
        assert refs(repo)[REF] == winners[0][2]  # the ref names the winner's commit


def test_a_stale_expected_value_loses_and_changes_nothing(repo: Path) -> None:
    store = Store.open(str(repo))
    first, second, third = (_blob_commit(store, t) for t in ("one", "two", "three"))
    store.update_refs([RefUpdate(REF, None, first)])
    store.update_refs([RefUpdate(REF, first, second)])
    before = refs(repo)
    with pytest.raises(Conflict, match="moved: expected"):
        store.update_refs([RefUpdate(REF, first, third)])  # read before the second write
    with pytest.raises(Conflict):
        store.update_refs([RefUpdate(REF, None, third)])  # create-only over an existing ref
    assert refs(repo) == before
    # several refs move together or not at all
    other = "refs/genjob/jobs/other"
    with pytest.raises(Conflict):
        store.update_refs([RefUpdate(other, None, third), RefUpdate(REF, first, third)])
    assert refs(repo) == before


def test_a_lock_left_by_a_dead_writer_is_named_and_recover_clears_it(repo: Path) -> None:
    """A `.lock` of a git-genjob writer that died (kill -9 between lock and rename)."""
    from git_genjob.storage import locks
    from tests.helpers.common import run_genjob

    store = Store.open(str(repo))
    first, second = _blob_commit(store, "one"), _blob_commit(store, "two")
    store.update_refs([RefUpdate(REF, None, first)])
    ctx = multiprocessing.get_context("fork")

    def die_holding_the_lock() -> None:
        locks.announce(store.common_dir, [REF])
        (repo / ".git" / f"{REF}.lock").write_text(f"{second}\n")
        import os

        os._exit(0)  # no release: as a SIGKILL leaves it

    p = ctx.Process(target=die_holding_the_lock)
    p.start()
    p.join(10)
    with pytest.raises(StaleLock, match=r"stale lock file .*race\.lock") as err:
        store.update_refs([RefUpdate(REF, first, second)])
    assert "git genjob recover" in (err.value.hint or "")
    assert refs(repo)[REF] == str(first)
    res = run_genjob("recover", "--json", cwd=repo)
    assert res.code == 0 and any(path.endswith("race.lock") for path in json.loads(res.out)["locks"])
    store.update_refs([RefUpdate(REF, first, second)])
    assert refs(repo)[REF] == str(second)


def test_blob_digests_match_sha256_of_git_s_own_copy_for_small_and_streamed_blobs(repo: Path) -> None:
    """Three blobs above STREAM_ABOVE go two at a time through `git cat-file`; each digest and
    size must equal sha256 of the bytes `git cat-file` prints, and `done` sees every blob once."""
    import hashlib
    import os
    import subprocess

    store = Store.open(str(repo))
    datas = [os.urandom(STREAM_ABOVE + 1 + i * 70_001) for i in range(3)] + [b"small\n", b""]
    oids = [store.blob(d) for d in datas]
    seen: list[int] = []
    got = blob_digests(store, oids, seen.append)
    for oid in oids:
        printed = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", str(oid)], capture_output=True).stdout
        assert got[oid] == ("sha256:" + hashlib.sha256(printed).hexdigest(), len(printed))
    assert sorted(seen) == sorted(len(d) for d in datas)


def test_blob_digests_of_a_tree_or_a_missing_object_is_refused(repo: Path) -> None:
    from git_genjob.documents.errors import BadInput

    store = Store.open(str(repo))
    tree = raw_repo(store).head.peel(pygit2.Commit).tree_id
    with pytest.raises(BadInput, match="is not a blob"):
        blob_digests(store, [tree])
    with pytest.raises(KeyError):
        blob_digests(store, [pygit2.Oid(hex="1" * 40)])


def _hold_lock(path: str, value: pygit2.Oid, locked, finish) -> None:  # type: ignore[no-untyped-def]
    from git_genjob.storage import locks

    store = Store.open(path)
    locks.announce(store.common_dir, [REF])
    own = pygit2.Repository(path)  # this process's own handle (a forked one is not)
    with own.transaction() as txn:
        txn.lock_ref(REF)
        locked.set()
        finish.wait(10)
        txn.set_target(REF, value, message="holder")
    locks.release(store.common_dir)


def test_a_built_update_that_loses_writes_no_object(repo: Path) -> None:
    """update_ref_built checks the expected value under the lock before it builds: a stale
    expected value, or (wait=False) a lock another running git-genjob process holds, is a
    conflict and build never runs, so a lost claim leaves no unreachable objects behind."""
    store = Store.open(str(repo))
    first = _blob_commit(store, "first")
    store.update_refs([RefUpdate(REF, None, first)])
    calls: list[str] = []

    def build() -> pygit2.Oid:
        calls.append("built")
        return _blob_commit(store, "second")

    with pytest.raises(Conflict, match="moved"):
        store.update_ref_built(REF, None, build, "stale")
    ctx = multiprocessing.get_context("fork")
    locked, finish = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(str(repo), first, locked, finish))
    holder.start()  # another git-genjob process, mid-update of REF
    try:
        assert locked.wait(10)
        with pytest.raises(Conflict, match="is locked by another writer"):
            store.update_ref_built(REF, first, build, "busy", wait=False)
    finally:
        finish.set()
        holder.join(10)
    assert calls == []
    assert store.ref_target(REF) == first
    new = store.update_ref_built(REF, first, build, "wins")
    assert calls == ["built"] and store.ref_target(REF) == new
    assert store.get_commit(new).message == "second\n"


def test_a_failed_object_write_inside_the_lock_is_not_taken_for_a_held_lock(repo: Path) -> None:
    """build() failing with a libgit2 error surfaces that error at once (not a 'could not lock'
    conflict after waiting), releases the lock and leaves the ref as it was."""
    store = Store.open(str(repo))
    first = _blob_commit(store, "first")
    store.update_refs([RefUpdate(REF, None, first)])

    def build() -> pygit2.Oid:
        raise pygit2.GitError("disk full (planted)")

    with pytest.raises(pygit2.GitError, match="disk full"):
        store.update_ref_built(REF, first, build, "fails")
    assert store.ref_target(REF) == first
    assert not (repo / ".git" / f"{REF}.lock").exists()


def test_an_object_over_its_limit_is_refused_before_it_is_inflated(repo: Path) -> None:
    """`read` checks the object header first: a document over DOCUMENT_MAX, a commit over it,
    is BadInput naming its size and the limit; a caller reading the user's own files says so."""
    from git_genjob.documents.errors import BadInput
    from git_genjob.storage.store import DOCUMENT_MAX

    store = Store.open(str(repo))
    big = store.blob(b"\0" * (DOCUMENT_MAX + 1))  # 16 MiB of zeros: a few KiB in a pack
    with pytest.raises(BadInput, match=rf"is {DOCUMENT_MAX + 1} bytes, over the {DOCUMENT_MAX}-byte limit"):
        store.read(big)
    assert len(store.read(big, limit=None)) == DOCUMENT_MAX + 1
    tree = git(repo, "mktree", input=f"100644 blob {big}\tf\n").strip()
    message = "x" * (DOCUMENT_MAX + 1)
    commit = git(repo, "commit-tree", tree, input=message).strip()
    with pytest.raises(BadInput, match="commit .* over the"):
        store.get_commit(commit)
    small = store.blob(b"ok")
    assert store.read(small) == b"ok"
