"""The replay cache (SPEC §7): hits send nothing, normalization, failures, drift, concurrency, offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from git_genjob.replay.cache import normalize
from tests.helpers.common import ask, git, refs, run_genjob, setup_worker
from tests.helpers.stubserver import Stub


def test_hit_opens_no_connection(repo: Path, stub: Stub) -> None:
    code, text, out = ask(repo, stub.url, "Write hello")
    assert code == 0 and text.startswith("fresh ") and out == "hello\n" and stub.count == 1
    fp = text.split()[1]
    code, text, out = ask(repo, stub.url, "Write hello")
    assert code == 0 and text.strip() == f"replay {fp}" and out == "hello\n"
    assert stub.count == 1
    assert (repo / ".git/genjob/hits.log").read_text().startswith(fp + " ")
    stub.close()
    assert ask(repo, stub.url, "Write hello", "--mode", "offline")[0] == 0


def test_normalization_makes_prompts_replay_each_other(repo: Path, stub: Stub) -> None:
    a = "Fix /home/alice/src/app.py   \nrun at 2026-12-02T14:27:23Z in /tmp/tmpab12cd\n\n"
    b = "\nFix /Users/bob/src/app.py\nrun at 2025-01-01T00:00:00.123+02:00 in /tmp/xyz\n"
    assert normalize(a).text == normalize(b).text
    assert ask(repo, stub.url, a)[0] == 0
    code, text, _ = ask(repo, stub.url, b)
    assert code == 0 and text.startswith("replay ") and stub.count == 1
    res = run_genjob(
        "cache",
        "explain",
        "--prompt-file",
        "prompt.txt",
        "--endpoint",
        f"openai:{stub.url}/v1",
        "--model",
        "m1",
        cwd=repo,
    )
    assert "home directory: '/Users/bob' -> '/build'" in res.out and "timestamp" in res.out
    assert text.split()[1] in res.out


@pytest.mark.parametrize("mode", ["down", "status:429", "status:500", "status:503", "truncate", "length"])
def test_failures_exit_3_with_sentinel_and_record_nothing(repo: Path, stub: Stub, mode: str) -> None:
    url = stub.url
    if mode == "down":
        stub.close()
    else:
        stub.mode = mode
    code, text, out = ask(repo, url, "Write hello")
    assert code == 3, text
    assert out == "model_unavailable\n"
    assert "refs/genjob/replays" not in refs(repo)


def test_secret_answers_are_never_stored(repo: Path, stub: Stub) -> None:
    stub.answer = "key: ghp_" + "x1Y2" * 10
    code, text, _ = ask(repo, stub.url, "Write hello")
    assert code == 2 and "GitHub token" in text and "x1Y2" not in text
    assert "refs/genjob/replays" not in refs(repo)


def test_drift_review(repo: Path, stub: Stub) -> None:
    code, text, _ = ask(repo, stub.url, "Write hello")
    fp = text.split()[1]
    stub.answer = "bonjour\n"
    code, text, out = ask(repo, stub.url, "Write hello", "--mode", "refresh")
    assert code == 0 and f"drift {fp}" in text and out == "hello\n"
    assert run_genjob("cache", "drift", fp, cwd=repo).code == 1
    assert ask(repo, stub.url, "Write hello")[2] == "hello\n"
    import hashlib

    new = hashlib.sha256(b"bonjour\n").hexdigest()
    old = hashlib.sha256(b"hello\n").hexdigest()
    assert run_genjob("cache", "reject", fp, new, cwd=repo).code == 0
    assert run_genjob("cache", "drift", fp, cwd=repo).code == 0
    assert ask(repo, stub.url, "Write hello")[2] == "hello\n"
    stub.answer = "hola\n"
    ask(repo, stub.url, "Write hello", "--mode", "refresh")
    hola = hashlib.sha256(b"hola\n").hexdigest()
    assert run_genjob("cache", "accept", fp, hola, cwd=repo).code == 0
    assert run_genjob("cache", "drift", fp, cwd=repo).code == 0
    count = stub.count
    assert ask(repo, stub.url, "Write hello")[2] == "hola\n" and stub.count == count
    shown = json.loads(run_genjob("cache", "show", fp, "--json", cwd=repo).out)
    assert shown["served"] == hola and old in shown["answers"]


SCRIPT = """
import sys
from git_genjob.replay.cache import Cache
from git_genjob.storage.store import Store
cache = Cache(Store.open(sys.argv[1]))
for i in range(25):
    fp = f"{sys.argv[2]}{i:062d}"
    cache.add(fp, {"type": "recorded", "answer": "0" * 64}, f"answer {sys.argv[2]} {i}")
"""


def test_two_writers_record_concurrently(repo: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(repo), p]) for p in ("aa", "bb")]
    for p in procs:
        assert p.wait(timeout=300) == 0
    rows = json.loads(run_genjob("cache", "ls", "--json", cwd=repo).out)
    assert len(rows) == 50


def test_fetched_replays_work_offline_when_a_trusted_key_signed_them(repo: Path, stub: Stub, tmp_path: Path) -> None:
    key = setup_worker(repo)  # w1, trusted for genjob-replay in the committed store
    ask(repo, stub.url, "Write hello", "--signing-key", str(key))
    ask(repo, stub.url, "Write unsigned")  # recorded without a key: it serves this clone only
    stub.close()
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    git(other, "fetch", "-q", str(repo), "refs/genjob/*:refs/genjob/*")
    code, text, out = ask(other, stub.url, "Write hello", "--mode", "offline")
    assert code == 0 and text.startswith("replay ") and out == "hello\n"
    code, _, out = ask(other, stub.url, "Write unsigned", "--mode", "offline")
    assert code == 3 and out == "model_unavailable\n"  # SPEC §11: an unsigned answer from elsewhere never serves
    assert ask(repo, stub.url, "Write unsigned", "--mode", "offline")[0] == 0  # but it does where it was recorded
    code, _, out = ask(other, stub.url, "Something new", "--mode", "offline")
    assert code == 3 and out == "model_unavailable\n"


def test_import_replay_logs(repo: Path, tmp_path: Path) -> None:
    import hashlib

    fp = "ab" * 32
    logs = tmp_path / "logs"
    logs.mkdir()
    rows = [
        {
            "fingerprint": fp,
            "endpoint": "http://x",
            "version": "m",
            "response": r,
            "response_sha256": hashlib.sha256(r.encode()).hexdigest(),
            "created_at_utc": f"2026-01-0{i + 1}T00:00:00Z",
        }
        for i, r in enumerate(["one", "two"])
    ]
    (logs / f"{fp}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert run_genjob("cache", "import", str(logs), cwd=repo).code == 0
    assert run_genjob("cache", "drift", fp, cwd=repo).code == 1
    shown = json.loads(run_genjob("cache", "show", fp, "--json", cwd=repo).out)
    assert shown["served"] == hashlib.sha256(b"one").hexdigest()


def test_accept_can_flip_back_and_forth(repo: Path, stub: Stub) -> None:
    import hashlib

    code, text, _ = ask(repo, stub.url, "Write hello")
    fp = text.split()[1]
    stub.answer = "bonjour\n"
    ask(repo, stub.url, "Write hello", "--mode", "refresh")
    old, new = (hashlib.sha256(t).hexdigest() for t in (b"hello\n", b"bonjour\n"))
    for sha, text_served in ((new, "bonjour\n"), (old, "hello\n"), (new, "bonjour\n")):
        assert run_genjob("cache", "accept", fp, sha, cwd=repo).code == 0
        assert run_genjob("cache", "drift", fp, cwd=repo).code == 0
        assert ask(repo, stub.url, "Write hello", "--mode", "offline")[2] == text_served


def test_ask_speaks_both_dialects_as_the_generators_name_them(repo: Path, stub: Stub) -> None:
    """Seed 002's endpoint: MODEL_ENDPOINT=http://127.0.0.1:8080/model, plain POST, body = answer."""
    (repo / "p.txt").write_text("Write hello\n")
    stub.answer = "hello from the plain endpoint\n"
    base = ["ask", "--prompt-file", "p.txt", "--out-file", "o.txt", "--json"]
    res = run_genjob(*base, "--endpoint", f"{stub.url}/model", cwd=repo)
    assert res.code == 0, res.err
    assert stub.requests[-1] == {"prompt": "Write hello", "format": "text"}  # normalized: no trailing space
    assert (repo / "o.txt").read_text() == "hello from the plain endpoint\n"
    fp = json.loads(res.out)["fingerprint"]
    res = run_genjob(*base, "--endpoint", f"http:{stub.url}/model", cwd=repo)  # the same dialect, named
    assert json.loads(res.out) == {"fingerprint": fp, "source": "replay", "out_file": "o.txt"}
    assert stub.count == 1
    res = run_genjob(*base, "--endpoint", f"openai:{stub.url}/v1", "--model", "m1", cwd=repo)
    assert res.code == 0 and stub.requests[-1]["messages"][0]["content"] == "Write hello"
    assert json.loads(res.out)["fingerprint"] != fp
    res = run_genjob(*base, "--endpoint", f"openai:{stub.url}/v1", cwd=repo)
    assert res.code == 2 and "needs --model" in res.err
    res = run_genjob(*base, "--endpoint", "ftp:example", cwd=repo)
    assert res.code == 2 and "is not a URL" in res.err


def test_two_processes_missing_one_fingerprint_ask_once(repo: Path, stub: Stub) -> None:
    """The second waits for the first (an flock per fingerprint) and replays its answer."""
    import subprocess
    import sys

    (repo / "p.txt").write_text("the same question\n")
    stub.delay = 1.0
    args = [sys.executable, "-m", "git_genjob", "ask", "--endpoint", f"{stub.url}/model", "--prompt-file", "p.txt"]
    procs = [
        subprocess.Popen([*args, "--out-file", f"o{n}.txt"], cwd=repo, stdout=subprocess.PIPE, text=True)
        for n in range(2)
    ]
    outs = sorted(p.communicate(timeout=60)[0].split()[0] for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert stub.count == 1 and outs == ["fresh", "replay"]
    assert (repo / "o0.txt").read_text() == (repo / "o1.txt").read_text() == "hello\n"
    assert not list((repo / ".git/genjob/asking").iterdir())  # no lock file outlives its ask


def test_a_model_answer_that_looks_like_a_credential_ends_the_attempt_at_once(repo: Path, stub: Stub) -> None:
    """The answer is refused (never stored) and the attempt ends with an aborted receipt that
    says why; before, `work` exited 2 and left the job `sending` until its lease lapsed."""
    from tests.helpers.common import setup_worker, submit_key

    key = setup_worker(repo)
    k = submit_key(repo, "-m", "ask the model", "src/user.py")
    token = "ghp_" + "x1Y2" * 10
    stub.answer = f"key: {token}"
    res = run_genjob("work", "--generator", f"http:{stub.url}/gen", "--signing-key", str(key), "--once", cwd=repo)
    assert res.code == 0, res.err
    doc = json.loads(run_genjob("status", k, "--json", cwd=repo).out)
    assert (doc["state"], doc["result"]) == ("done", "aborted")
    receipt = json.loads(run_genjob("show", k, "--json", cwd=repo).out)["receipt"]
    assert receipt is not None
    verdict = json.loads(run_genjob("verify", k, "--json", cwd=repo).out)
    reasons = [c["detail"] for c in verdict["checks"]]
    assert any("looks like a GitHub token" in r for r in reasons), reasons
    assert "refs/genjob/replays" not in refs(repo)
    assert token not in git(repo, "log", "--all", "-p", "--format=%B")
    assert stub.count == 1


def test_cache_ls_lists_a_damaged_entry_as_one_row_and_ignores_what_is_no_entry(repo: Path, stub: Stub) -> None:
    """A replays ref from a remote may hold anything: a blob where an entry's tree belongs is one
    DAMAGED row, names that are no fingerprint are not entries; the listing itself succeeds."""
    import pygit2

    from git_genjob.storage.layout import REPLAYS_REF
    from git_genjob.storage.store import RefUpdate, Store
    from tests.helpers.common import raw_repo

    code, text, _ = ask(repo, stub.url, "Write hello")
    good = text.split()[1]
    store = Store.open(str(repo))
    tip = store.ref_target(REPLAYS_REF)
    assert tip is not None
    raw = raw_repo(store)
    root = raw.TreeBuilder(raw[tip].peel(pygit2.Commit).tree)
    lead = "ab" if not good.startswith("ab") else "ac"  # a shard of its own: the good entry's stays
    damaged = lead + "0" * 62
    shard = raw.TreeBuilder()
    shard.insert(damaged, store.blob(b"not a tree"), pygit2.enums.FileMode.BLOB)
    shard.insert("README", store.blob(b"x"), pygit2.enums.FileMode.BLOB)
    root.insert(lead, shard.write(), pygit2.enums.FileMode.TREE)
    junk = raw.TreeBuilder()
    junk.insert("cd" + "1" * 62, store.blob(b"x"), pygit2.enums.FileMode.BLOB)  # under another shard
    root.insert("src", junk.write(), pygit2.enums.FileMode.TREE)
    new = store.commit(root.write(), [tip], "hostile\n")
    store.update_refs([RefUpdate(REPLAYS_REF, tip, new)], message="test")
    res = run_genjob("cache", "ls", "--json", cwd=repo)
    assert res.code == 0, res.err
    rows = {r["fingerprint"]: r for r in json.loads(res.out)}
    assert sorted(rows) == sorted([good, damaged])
    assert rows[good]["damaged"] is None and rows[damaged]["damaged"] == f"replay cache entry {damaged} is not a tree"
    human = run_genjob("cache", "ls", cwd=repo)
    assert human.code == 0 and f"{damaged} DAMAGED: replay cache entry" in human.out
    shown = run_genjob("cache", "show", damaged, cwd=repo)
    assert shown.code == 2 and "is not a tree" in shown.err
