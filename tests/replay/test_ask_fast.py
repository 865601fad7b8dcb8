"""`ask`'s replay hit without libgit2 or click (issue 24): it serves only what the slow path
served from the same events, trust store and local writes, and falls back whenever one moved."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.contract.test_imports import PROBE
from tests.helpers.common import ask, git, run_genjob, setup_worker
from tests.helpers.stubserver import Stub

ARGS = ["--model", "m1", "--prompt-file", "prompt.txt", "--out-file", "out.txt"]


def probe_ask(repo: Path, url: str, prompt: str, *extra: str) -> tuple[int, str, str, set[str]]:
    """`git genjob ask` as its own process: (exit code, stdout, out-file text, heavy modules loaded)."""
    (repo / "prompt.txt").write_text(prompt)
    args = ["ask", "--endpoint", f"openai:{url}/v1", *ARGS, *extra]
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=repo, capture_output=True, text=True, timeout=120)
    *lines, last = proc.stdout.strip().splitlines()
    code, *mods = last.split(" ")
    out = (repo / "out.txt").read_text() if (repo / "out.txt").exists() else ""
    return int(code), "\n".join(lines), out, set(mods) - {""}


def fast(result: tuple[int, str, str, set[str]]) -> tuple[int, str, set[str]]:
    """(exit code, out-file text, heavy modules loaded)."""
    return result[0], result[2], result[3]


def served(repo: Path) -> list[str]:
    d = repo / ".git/genjob/replay-served"
    return sorted(p.name for p in d.iterdir() if p.name != "config") if d.exists() else []


def test_a_replay_hit_the_slow_path_served_is_answered_without_libgit2_or_click(repo: Path, stub: Stub) -> None:
    setup_worker(repo)
    assert ask(repo, stub.url, "Write hello")[0] == 0  # the miss: asks and records
    assert not served(repo)  # only a replay hit is remembered
    code, text, out = ask(repo, stub.url, "Write hello")  # the slow path's hit
    fp = text.split()[1]
    assert code == 0 and out == "hello\n" and served(repo) == [fp]
    (repo / "out.txt").unlink()
    hits = (repo / ".git/genjob/hits.log").read_text().count("\n")
    code, stdout, out, mods = probe_ask(repo, stub.url, "Write hello")
    assert (code, stdout, out, mods) == (0, f"replay {fp}", "hello\n", set())
    assert (repo / ".git/genjob/hits.log").read_text().splitlines()[hits].startswith(f"{fp} {fp} ")
    code, stdout, _, mods = probe_ask(repo, stub.url, "Write hello  \n\n", "--json", "--mode=offline")
    assert code == 0 and mods == set()
    assert json.loads(stdout) == {"fingerprint": fp, "source": "replay", "out_file": "out.txt"}
    assert stub.count == 1
    # what the fast path does not decide goes the slow way, with the slow way's answer
    assert probe_ask(repo, stub.url, "Write hello", "--mode", "refresh")[3] >= {"click", "pygit2"}
    assert probe_ask(repo, stub.url, "Something new", "--mode", "offline")[:3] == (3, "", "model_unavailable\n")


def test_a_poisoned_unsigned_entry_is_never_served_by_the_fast_path(repo: Path, stub: Stub, tmp_path: Path) -> None:
    """Another clone's unsigned events count nowhere else (SPEC §11): neither a new entry nor an
    `accepted` event slipped into an entry this clone remembers changes what it serves."""
    key = setup_worker(repo)
    ask(repo, stub.url, "Write hello", "--signing-key", str(key))
    ask(repo, stub.url, "Write unsigned")  # no key: counts only in `repo`
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    git(other, "fetch", "-q", str(repo), "refs/genjob/*:refs/genjob/*")
    assert ask(other, stub.url, "Write hello", "--mode", "offline")[:3:2] == (0, "hello\n")  # slow: remembered
    assert fast(probe_ask(other, stub.url, "Write hello", "--mode", "offline")) == (0, "hello\n", set())

    code, _, out, mods = probe_ask(other, stub.url, "Write unsigned", "--mode", "offline")
    assert (code, out) == (3, "model_unavailable\n") and "pygit2" in mods
    assert len(served(other)) == 1

    # in `repo`, an unsigned drift accepted unsigned: served there, poison when fetched elsewhere
    stub.answer = "evil\n"
    code, text, _ = ask(repo, stub.url, "Write hello", "--mode", "refresh")
    fp = text.split()[1]
    evil = json.loads(run_genjob("cache", "show", fp, "--json", cwd=repo).out)["pending"][0]
    from git_genjob.replay.cache import Cache, accept
    from git_genjob.storage.store import Store

    accept(Cache(Store.open(str(repo))), fp, evil)  # unsigned (`cache accept` signs with the planner key)
    assert probe_ask(repo, stub.url, "Write hello", "--mode", "offline")[2] == "evil\n"
    git(other, "fetch", "-q", str(repo), "+refs/genjob/replays:refs/genjob/replays")
    for _ in range(2):  # the slow path (the ref moved), then the fast path: the trusted answer both times
        code, _, out, _ = probe_ask(other, stub.url, "Write hello", "--mode", "offline")
        assert (code, out) == (0, "hello\n")
    assert probe_ask(other, stub.url, "Write hello", "--mode", "offline")[3] == set()


def test_a_remembered_answer_stops_serving_when_its_signer_is_revoked(repo: Path, stub: Stub, tmp_path: Path) -> None:
    key = setup_worker(repo)
    ask(repo, stub.url, "Write hello", "--signing-key", str(key))
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    git(other, "fetch", "-q", str(repo), "refs/genjob/*:refs/genjob/*")
    ask(other, stub.url, "Write hello", "--mode", "offline")
    assert fast(probe_ask(other, stub.url, "Write hello", "--mode", "offline")) == (0, "hello\n", set())
    assert run_genjob("trust", "revoke", "w1", cwd=other).code == 0
    # not committed yet: the trust store on HEAD still trusts the key, and so do both paths
    assert fast(probe_ask(other, stub.url, "Write hello", "--mode", "offline")) == (0, "hello\n", set())
    git(other, "add", ".genjob")
    git(other, "commit", "-q", "-m", "revoke w1")
    code, _, out, mods = probe_ask(other, stub.url, "Write hello", "--mode", "offline")
    assert (code, out) == (3, "model_unavailable\n") and "pygit2" in mods


def test_a_remembered_answer_holds_only_while_the_config_and_local_writes_do(repo: Path, stub: Stub) -> None:
    setup_worker(repo)
    ask(repo, stub.url, "Write build-7 hello")
    ask(repo, stub.url, "Write build-7 hello")
    assert probe_ask(repo, stub.url, "Write build-7 hello")[3] == set()
    cfg = repo / ".genjob/config.toml"
    rule = 'rules = [{ pattern = "build-[0-9]+", replace = "build-N" }]'
    assert "# " + rule in cfg.read_text()
    cfg.write_text(cfg.read_text().replace("# " + rule, rule))
    code, stdout, out, mods = probe_ask(repo, stub.url, "Write build-7 hello", "--mode", "offline")
    assert (code, out) == (3, "model_unavailable\n") and "pygit2" in mods  # another fingerprint now
    assert ask(repo, stub.url, "Write build-8 hello")[0] == 0  # recorded under the rule
    assert ask(repo, stub.url, "Write build-9 hello")[0] == 0  # the slow hit remembers it
    assert probe_ask(repo, stub.url, "Write build-1 hello")[::3] == (0, set())
    with open(repo / ".git/genjob/replay-local", "a") as fh:  # a local write moves the stamp
        fh.write("")
        fh.write("0" * 64 + " " + "1" * 64 + "\n")
    code, _, out, mods = probe_ask(repo, stub.url, "Write build-1 hello")
    assert (code, out) == (0, "hello\n") and {"click", "pygit2"} <= mods  # the slow path decided again


def test_a_remembered_answer_ends_when_its_signers_validity_does(repo: Path, stub: Stub, tmp_path: Path) -> None:
    import time

    setup_worker(repo)
    key = tmp_path / "keys" / "w2"
    assert run_genjob("keygen", "--name", "w2", "--out", str(key), cwd=repo).code == 0
    ends = time.time() + 8
    until = time.strftime("%Y%m%d%H%M%S", time.gmtime(ends))
    assert run_genjob("trust", "add", "w2", str(key) + ".pub", "--valid-before", until, cwd=repo).code == 0
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "-m", "trust w2 for a few seconds")
    ask(repo, stub.url, "Write hello", "--signing-key", str(key))
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    git(other, "fetch", "-q", str(repo), "refs/genjob/*:refs/genjob/*")
    assert ask(other, stub.url, "Write hello", "--mode", "offline")[::2] == (0, "hello\n")
    assert fast(probe_ask(other, stub.url, "Write hello", "--mode", "offline")) == (0, "hello\n", set())
    time.sleep(max(0.0, int(ends) + 1.5 - time.time()))  # the key's window has closed (second precision)
    code, _, out, mods = probe_ask(other, stub.url, "Write hello", "--mode", "offline")
    assert (code, out) == (3, "model_unavailable\n") and "pygit2" in mods


def test_a_linked_worktree_takes_the_slow_path_and_keeps_no_memo(repo: Path, stub: Stub, tmp_path: Path) -> None:
    setup_worker(repo)
    ask(repo, stub.url, "Write hello")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    for _ in range(2):
        code, stdout, out, mods = probe_ask(linked, stub.url, "Write hello", "--mode", "offline")
        assert (code, out) == (0, "hello\n") and stdout.startswith("replay ") and "pygit2" in mods
    assert not served(repo)
