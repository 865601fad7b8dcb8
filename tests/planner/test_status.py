"""`status --all` reads one rows blob per archive shard, and nothing it reads there can mislead it."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2

from git_genjob.storage.archive import Archive
from git_genjob.storage.layout import ARCHIVE_REF, ROWS_DIR, shard
from git_genjob.storage.store import RefUpdate, Store
from tests.helpers.common import (
    git,
    raw_repo,
    replace_tip,
    repo_with_remote,
    run_genjob,
    setup_worker,
    submit_key,
    work,
)


def _all(repo: Path) -> list[dict]:  # type: ignore[type-arg]
    res = run_genjob("status", "--all", "--json", cwd=repo)
    assert res.code == 0, res.err
    return json.loads(res.out)  # type: ignore[no-any-return]


def _rewrite_archive(repo: Path, change) -> None:  # type: ignore[no-untyped-def]
    """A new archive commit whose tree is `change(root TreeBuilder, store)` (an older or forged archive)."""
    store = Store.open(str(repo))
    tip = store.ref_target(ARCHIVE_REF)
    assert tip is not None
    raw = raw_repo(store)
    root = raw.TreeBuilder(raw[tip].peel(pygit2.Commit).tree)  # a builder takes its own repository's tree
    change(root, store)
    new = store.commit(root.write(), [tip], "rewritten\n")
    store.update_refs([RefUpdate(ARCHIVE_REF, tip, new)], message="test")


def test_rows_say_what_the_documents_say(repo: Path) -> None:
    key = setup_worker(repo)
    applied = submit_key(repo, "-m", "applied one", "src/user.py")
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0
    assert run_genjob("apply", applied, cwd=repo).code == 0
    dropped = submit_key(repo, "-m", "dropped one", "README.md")
    assert run_genjob("drop", dropped, "--why", "not needed", cwd=repo).code == 0
    live = submit_key(repo, "-m", "still queued", "tests/test_user.py")
    listing = git(repo, "ls-tree", "-r", "--name-only", f"{ARCHIVE_REF}:{ROWS_DIR}").split()
    assert sorted(listing) == sorted({shard(applied), shard(dropped)})
    with_rows = _all(repo)
    assert [(r["key"], r["state"]) for r in with_rows] == [(applied, "applied"), (dropped, "dropped"), (live, "queued")]
    _rewrite_archive(repo, lambda root, store: root.remove(ROWS_DIR))  # an archive written before rows
    assert _all(repo) == with_rows
    human = run_genjob("status", "--all", cwd=repo).out.splitlines()
    assert [line.split()[:2] for line in human] == [[applied, "applied"], [dropped, "dropped"], [live, "queued"]]


def test_a_row_that_names_another_tree_is_not_believed(repo: Path) -> None:
    """Rows are written for one shard tree (their first line names it) and one entry tree each:
    rows left from another tree, as a merge or an older writer leaves them, are not believed."""
    setup_worker(repo)
    k = submit_key(repo, "-m", "dropped one", "README.md")
    assert run_genjob("drop", k, "--why", "x", cwd=repo).code == 0
    header, line = git(repo, "show", f"{ARCHIVE_REF}:{ROWS_DIR}/{shard(k)}").splitlines()
    assert header == "#tree " + git(repo, "rev-parse", f"{ARCHIVE_REF}:{shard(k)}").strip()
    sort_key, key, _, rest = line.split("\t", 3)
    stale = "\t".join([sort_key, key, "0" * 40, rest.replace("dropped", "applied")])  # another entry tree
    for blob in (f"#tree {'0' * 40}\n{stale}\n", f"{stale}\n"):  # for another shard tree, or for none

        def change(root: pygit2.TreeBuilder, store: Store, blob: str = blob) -> None:
            rows = raw_repo(store).TreeBuilder()
            rows.insert(shard(k), store.blob(blob.encode()), pygit2.enums.FileMode.BLOB)
            root.insert(ROWS_DIR, rows.write(), pygit2.enums.FileMode.TREE)

        _rewrite_archive(repo, change)
        assert [(r["key"], r["state"]) for r in _all(repo)] == [(k, "dropped")], blob


def _same_shard_keys() -> tuple[str, str]:
    seen: dict[str, str] = {}
    for n in range(10000):
        k = f"job-{n}"
        if shard(k) in seen:
            return seen[shard(k)], k
        seen[shard(k)] = k
    raise AssertionError("no two keys share a shard")


def test_two_clones_archiving_into_one_shard_merge_their_rows(tmp_path: Path) -> None:
    bare, a = repo_with_remote(tmp_path, "a")
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    ka, kb = _same_shard_keys()
    for repo, k in ((a, ka), (b, kb)):
        assert run_genjob("submit", "-m", f"job {k}", "README.md", "--key", k, cwd=repo).code == 0
        assert run_genjob("drop", k, "--why", "test", cwd=repo).code == 0
    assert run_genjob("push", cwd=a).code == 0
    res = run_genjob("fetch", "--json", cwd=b)
    assert res.code == 0, res.err
    assert "refs/genjob/archive" in json.loads(res.out)["merged"]
    rows = git(b, "show", f"{ARCHIVE_REF}:{ROWS_DIR}/{shard(ka)}").splitlines()
    assert sorted(line.split("\t")[1] for line in rows) == sorted([ka, kb])
    assert sorted((r["key"], r["state"]) for r in _all(b)) == sorted([(ka, "dropped"), (kb, "dropped")])
    git(b, "fsck", "--strict")


def test_an_oversized_rows_blob_is_ignored(repo: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A rows blob over ROWS_MAX_BYTES is never read: here one whose lines would be believed."""
    import git_genjob.storage.archive

    setup_worker(repo)
    k = submit_key(repo, "-m", "dropped one", "README.md")
    assert run_genjob("drop", k, "--why", "x", cwd=repo).code == 0
    blob = git(repo, "show", f"{ARCHIVE_REF}:{ROWS_DIR}/{shard(k)}").replace("dropped", "applied")

    def change(root: pygit2.TreeBuilder, store: Store) -> None:  # same shard tree, same entry ids
        rows = raw_repo(store).TreeBuilder()
        rows.insert(shard(k), store.blob(blob.encode()), pygit2.enums.FileMode.BLOB)
        root.insert(ROWS_DIR, rows.write(), pygit2.enums.FileMode.TREE)

    _rewrite_archive(repo, change)
    assert [r["state"] for r in _all(repo)] == ["applied"]  # a row written for this tree is believed
    monkeypatch.setattr(git_genjob.storage.archive, "ROWS_MAX_BYTES", len(blob) - 1)
    assert [r["state"] for r in _all(repo)] == ["dropped"]  # too big: the documents are read instead


def test_live_rows_are_cached_by_tip_and_follow_every_event(repo: Path) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "one", "src/user.py")
    assert [(r["key"], r["state"]) for r in _all(repo)] == [(k, "queued")]
    cache = repo / ".git/genjob/status-rows"
    tip = git(repo, "rev-parse", f"refs/genjob/jobs/{k}").strip()
    stamp, line = cache.read_text().splitlines()  # rows are valid under one trust store's fingerprint
    assert stamp.startswith("#trust\t") and line.startswith(f"{tip}\t")
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0  # a new tip: read afresh
    assert [(r["key"], r["state"], r["result"]) for r in _all(repo)] == [(k, "done", "ok")]
    new_tip = git(repo, "rev-parse", f"refs/genjob/jobs/{k}").strip()
    assert cache.read_text().splitlines()[1].split("\t")[0] == new_tip  # only current tips are kept
    # a cache line that is not this job's row (garbage, another key) is not believed
    cache.write_text(f"{stamp}\n{new_tip}\t" + '{"key":"other","state":"dropped","instruction":"x"}\n')
    assert [(r["key"], r["state"]) for r in _all(repo)] == [(k, "done")]
    cache.write_text(f"{stamp}\n{new_tip}\tnot json\n")
    assert [(r["key"], r["state"]) for r in _all(repo)] == [(k, "done")]
    # the same tip under another trust store is read afresh: the planner is no longer trusted
    signers = repo / ".genjob" / "allowed_signers"
    signers.write_text("".join(x + "\n" for x in signers.read_text().splitlines() if "genjob-job" not in x))
    assert [(r["key"], r["planner"]) for r in _all(repo)] == [(k, "untrusted")]


def _strict(text: str) -> list[dict]:  # type: ignore[type-arg]
    """The output as a strict JSON parser reads it: no NaN or Infinity, no raw control characters."""

    def no_constant(name: str) -> None:
        raise AssertionError(f"{name} in the output")

    return json.loads(text, parse_constant=no_constant)  # type: ignore[no-any-return]


def _set_rows(repo: Path, name: str, blob: str) -> None:
    def change(root: pygit2.TreeBuilder, store: Store) -> None:
        rows = raw_repo(store).TreeBuilder()
        rows.insert(name, store.blob(blob.encode()), pygit2.enums.FileMode.BLOB)
        root.insert(ROWS_DIR, rows.write(), pygit2.enums.FileMode.TREE)

    _rewrite_archive(repo, change)


def test_a_row_out_of_shape_or_disagreeing_with_its_json_is_not_believed(repo: Path) -> None:
    """A hostile archive's rows name the right trees but carry a line that is not one JSON
    object, or one that says another thing than its columns: `status --all --json` stays one
    strict JSON document and shows what the job's documents say, with and without `#tree`."""
    a, b = _same_shard_keys()
    for k in (a, b):
        assert run_genjob("submit", "-m", f"job {k}", "README.md", "--key", k, cwd=repo).code == 0
        assert run_genjob("drop", k, "--why", "x", cwd=repo).code == 0
    truth = _all(repo)
    assert sorted((r["key"], r["state"]) for r in truth) == sorted([(a, "dropped"), (b, "dropped")])
    header, *lines = git(repo, "show", f"{ARCHIVE_REF}:{ROWS_DIR}/{shard(a)}").splitlines()
    cols = {line.split("\t")[1]: line.split("\t") for line in lines}

    def line(k: str, text: str, state: str = "dropped") -> str:
        c = cols[k]
        return "\t".join([c[0], k, c[2], state, c[4], text])

    def row_json(k: str, **change: object) -> str:
        doc = {**json.loads(cols[k][5]), **change}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    good_b = line(b, cols[b][5])
    forged = {
        "a raw tab in the JSON": [line(a, row_json(a).replace('"dropped"', '"drop\tped"')), good_b],
        "not JSON": [line(a, row_json(a)[:-1]), good_b],
        "NaN": [line(a, row_json(a, state="applied").replace('"archived":true', '"archived":NaN'), "applied"), good_b],
        "another key in the JSON": [line(a, row_json(b)), good_b],
        "columns disagree with the JSON": [line(a, row_json(a, state="applied")), good_b],
        "trailing text": [line(a, row_json(a) + " "), good_b],
        "two lines that are JSON only together": [  # `{…"x":[1,` then `2]}{…b's row…}`
            line(a, row_json(a, state="applied", x=[1, 2]).removesuffix("2]}"), "applied"),
            line(b, "2]}" + row_json(b)),
        ],
        "one key twice": [line(a, cols[a][5]), line(a, cols[a][5])],
    }
    for why, forged_lines in forged.items():
        for head in (header + "\n", ""):  # vouched for the shard tree, or line by line
            _set_rows(repo, shard(a), head + "".join(f"{x}\n" for x in forged_lines))
            res = run_genjob("status", "--all", "--json", cwd=repo)
            assert res.code == 0, res.err
            assert _strict(res.out) == truth, (why, head)
            human = run_genjob("status", "--all", cwd=repo).out.splitlines()
            assert [x.split()[:2] for x in human] == [[r["key"], "dropped"] for r in truth], (why, head)


def test_a_rows_blob_is_parsed_once_then_remembered(repo: Path) -> None:
    """A rows blob that passed every check is remembered by id in `.git/genjob/rows-checked`;
    the file follows the archive (only current blobs) and never names a blob that failed."""
    checked = repo / ".git/genjob/rows-checked"
    k1 = submit_key(repo, "-m", "one", "README.md")
    assert run_genjob("drop", k1, "--why", "x", cwd=repo).code == 0
    assert not checked.exists()  # nothing is written until status reads the archive
    first = _all(repo)

    def blob_ids() -> set[str]:
        out = git(repo, "ls-tree", f"{ARCHIVE_REF}:{ROWS_DIR}")
        return {line.split()[2] for line in out.splitlines()}

    assert set(checked.read_text().split()) == blob_ids()
    assert _all(repo) == first  # remembered: the same rows
    k2 = submit_key(repo, "-m", "two", "src/user.py")
    assert run_genjob("drop", k2, "--why", "x", cwd=repo).code == 0
    assert sorted((r["key"], r["state"]) for r in _all(repo)) == sorted([(k1, "dropped"), (k2, "dropped")])
    assert set(checked.read_text().split()) == blob_ids()  # the replaced blobs are forgotten
    header, line = git(repo, "show", f"{ARCHIVE_REF}:{ROWS_DIR}/{shard(k1)}").splitlines()
    _set_rows(repo, shard(k1), f"{header}\n{line[:-1]}\n")  # its JSON cut short
    forged = git(repo, "rev-parse", f"{ARCHIVE_REF}:{ROWS_DIR}/{shard(k1)}").strip()
    assert sorted((r["key"], r["state"]) for r in _all(repo)) == sorted([(k1, "dropped"), (k2, "dropped")])
    assert forged in blob_ids()
    assert checked.read_text().split() == []  # the forged blob failed; k2's shard has none now


def _queued_job(repo: Path) -> str:
    return submit_key(repo, "-m", "Add a timeout", "src/user.py")


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_hostile_attempts_json_is_one_damaged_row(ready: tuple[Path, Path]) -> None:
    repo, _ = ready
    bad = _queued_job(repo)
    good = submit_key(repo, "-m", "Other", "tests/test_user.py")
    replace_tip(repo, bad, {"attempts.json": b'{"epoch":"x","state":"queued","attempts":[{"n":1}]}'})
    res = run_genjob("status", "--json", cwd=repo)
    assert res.code == 0, res.err
    rows = {r["key"]: r["state"] for r in json.loads(res.out)}
    assert rows == {bad: "damaged", good: "queued"}


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_a_damaged_archive_entry_is_one_damaged_row(ready: tuple[Path, Path]) -> None:
    """A hostile archive entry (fetched from a remote) must not hide every other archived job."""
    repo, _ = ready
    kept = submit_key(repo, "-m", "Other", "tests/test_user.py")
    assert run_genjob("drop", kept, "--why", "not needed", cwd=repo).code == 0
    store = Store.open(str(repo))
    tip = store.ref_target(ARCHIVE_REF)
    assert tip is not None
    bad = store.tree_with(None, "meta.json", store.blob(b'{"key":"x"}'))
    bad = store.tree_with(store.get(bad), "job.json", store.blob(b"{}"))  # type: ignore[arg-type]
    tree = Archive(store).tree_with(store.get_commit(tip).tree, "evil", bad)
    store.update_refs([RefUpdate(ARCHIVE_REF, tip, store.commit(tree, [tip], "hostile\n"))])
    res = run_genjob("status", "--all", "--json", cwd=repo)
    assert res.code == 0, res.err
    rows = {r["key"]: r["state"] for r in json.loads(res.out)}
    assert rows == {kept: "dropped", "evil": "damaged"}
