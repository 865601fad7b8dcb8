"""A newcomer's first day (issue 11): the trust store rule, hints that name the fix, key prefixes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.common import git, refs, run_genjob, submit_key, work


def _uncommitted_worker(repo: Path, name: str = "w1") -> Path:
    """The walkthrough as a newcomer types it: init, keygen, trust add, and no commit of .genjob/."""
    assert run_genjob("init", cwd=repo).code == 0
    key = repo.parent / "keys" / name
    assert run_genjob("keygen", "--name", name, "--out", str(key), cwd=repo).code == 0
    res = run_genjob("trust", "add", name, f"{key}.pub", cwd=repo)
    assert res.code == 0 and 'git add .genjob && git commit -m "genjob: trust w1"' in res.out
    return key


def test_an_uncommitted_trust_store_is_refused_with_the_fix(repo: Path) -> None:
    """verify/apply and audit/pre-push read one rule: the committed store of the branch."""
    key = _uncommitted_worker(repo)
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo new > src/user.py", "--once").code == 0
    before = (refs(repo), git(repo, "status", "--porcelain"))
    res = run_genjob("verify", k, cwd=repo)
    assert res.code == 1 and "is trusted only by the uncommitted .genjob/" in res.out
    assert "hint: commit the trust store first: git add .genjob && git commit" in res.err
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "git add .genjob && git commit" in res.err
    assert (refs(repo), git(repo, "status", "--porcelain")) == before  # nothing written
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "-m", "genjob: trust w1")
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert run_genjob("audit", cwd=repo).code == 0


def test_audit_trust_from_repairs_history_applied_before_the_store_was_committed(repo: Path) -> None:
    """A commit made by an older genjob (which applied with the work tree's store alone)."""
    key = _uncommitted_worker(repo)
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo new > src/user.py", "--once").code == 0
    signers = (repo / ".genjob/allowed_signers").read_text()
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "-m", "trust")
    assert run_genjob("apply", k, cwd=repo).code == 0
    # rewrite history as the old walkthrough left it: the trust commit after the applied one
    git(repo, "rebase", "-q", "--onto", "HEAD~2", "HEAD~1")  # drop the trust commit below the apply
    (repo / ".genjob").mkdir()
    (repo / ".genjob/allowed_signers").write_text(signers)
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "-m", "trust, committed late")
    res = run_genjob("audit", "--json", cwd=repo)
    assert res.code == 1
    (failing,) = [c for c in json.loads(res.out)["commits"] if not c["ok"]]
    assert any("git genjob audit --trust-from REV" in p for p in failing["problems"])
    res = run_genjob("audit", "--trust-from", "HEAD", cwd=repo)
    assert res.code == 0, res.out


def test_an_unknown_signer_gets_the_exact_trust_add_command(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_genjob("init", cwd=repo).code == 0
    keydir = repo.parent / "xdg" / "git-genjob" / "keys"
    env_key = keydir / "w9"
    assert run_genjob("keygen", "--name", "w9", "--out", str(env_key), cwd=repo).code == 0
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, env_key, "echo new > src/user.py", "--once").code == 0
    with monkeypatch.context() as env:
        env.setenv("XDG_CONFIG_HOME", str(repo.parent / "xdg"))  # where keygen puts keys by default
        res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1
    assert f"git genjob trust add w9 {env_key}.pub, then commit .genjob/" in res.err
    res = run_genjob("verify", k, cwd=repo)  # without the key on this machine: the unverified id, quoted
    assert res.code == 1 and "(unverified)" in res.err and "git genjob trust add NAME KEY.pub" in res.err


def test_key_prefixes_work_everywhere_a_key_is_typed(repo: Path) -> None:
    from tests.helpers.common import setup_worker

    key = setup_worker(repo)
    a = submit_key(repo, "-m", "a", "src/user.py")
    b = submit_key(repo, "-m", "b", "README.md")
    short = a[:8]
    assert json.loads(run_genjob("status", short, "--json", cwd=repo).out)["key"] == a
    assert json.loads(run_genjob("show", short, "--json", cwd=repo).out)["key"] == a
    common = next(
        (a[:n] for n in range(4, 32) if b.startswith(a[:n]) and not b.startswith(a[: n + 1])), None
    )  # the two keys share no 4-character prefix almost always; an exact key always wins
    if common is not None:
        assert run_genjob("show", common, cwd=repo).code == 2
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0
    assert run_genjob("verify", short, cwd=repo).code == 0
    assert run_genjob("apply", short, cwd=repo).code == 0
    assert json.loads(run_genjob("show", short, "--json", cwd=repo).out)["state"] == "applied"  # archived
    assert run_genjob("drop", b[:6], "--why", "not needed", cwd=repo).code == 0
    assert run_genjob("show", "abc", cwd=repo).code == 2  # under 4 characters: never a prefix


def test_ambiguous_prefix_is_refused(repo: Path) -> None:
    from tests.helpers.common import setup_worker

    setup_worker(repo)
    a = submit_key(repo, "-m", "a", "src/user.py", "--key", "fix-timeout-1")
    b = submit_key(repo, "-m", "b", "README.md", "--key", "fix-timeout-2")
    res = run_genjob("show", "fix-timeout", cwd=repo)
    assert res.code == 2 and "is the prefix of 2 jobs' keys" in res.err and a in res.err and b in res.err
    assert json.loads(run_genjob("show", "fix-timeout-2", "--json", cwd=repo).out)["key"] == b


def test_commands_before_init_say_to_run_it(repo: Path) -> None:
    key = repo.parent / "k"
    assert run_genjob("keygen", "--name", "w1", "--out", str(key), cwd=repo).code == 0
    assert "run git genjob init" in run_genjob("trust", "list", cwd=repo).out
    k = submit_key(repo, "-m", "x", "src/user.py")
    before = refs(repo)
    res = work(repo, key, "echo y > src/user.py", "--once")  # no store to judge a planner by: refused
    assert res.code == 2 and "is missing from this checkout" in res.err and "git genjob init" in res.err
    assert refs(repo) == before
    import os

    pub = (Path(os.environ["XDG_CONFIG_HOME"]) / "git-genjob/keys/planner.pub").read_text().split()
    planners = repo.parent / "planners"  # a worker handed the planners it trusts
    planners.write_text(f'ada namespaces="genjob-job" {pub[0]} {pub[1]}\n')
    assert work(repo, key, "echo y > src/user.py", "--once", "--allowed-signers", str(planners)).code == 0
    for command in ("verify", "apply"):
        res = run_genjob(command, k, cwd=repo)
        assert res.code == 1 and "run git genjob init, then git genjob trust add NAME KEY.pub" in res.err, command
    assert not (repo / ".genjob").exists()


def test_the_first_hour_end_to_end_with_a_team_and_doctor_all_ok(tmp_path: Path) -> None:
    """Issue 35's walk (the parts this package owns; install.sh is tests/test_install.py): a fresh
    HOME's author (no planner key yet), init, keygen, submit, work under the default sandbox,
    apply, push, a teammate's commit, resubmit --remote, a teammate's clone that fetches, logs,
    audits, and doctor with no failure; no traceback and no exit 0 on a failure anywhere."""
    from tests.helpers.common import drop_planner_key, repo_with_remote

    drop_planner_key()  # a fresh HOME
    bare, repo = repo_with_remote(tmp_path, "author")
    res = run_genjob("submit", "-m", "Add a docstring", "src/user.py", cwd=repo)
    assert res.code == 2 and "git genjob keygen --planner" in res.err  # refused, nothing queued
    assert run_genjob("init", cwd=repo).code == 0  # creates and trusts the planner key
    key = tmp_path / "keys" / "w1"
    assert run_genjob("keygen", "--name", "w1", "--out", str(key), cwd=repo).code == 0
    assert run_genjob("trust", "add", "w1", f"{key}.pub", cwd=repo).code == 0
    git(repo, "add", ".genjob")
    git(repo, "commit", "-qm", "genjob: trust w1")
    k = submit_key(repo, "-m", "Make fetch_user return the id", "src/user.py")
    res = work(repo, key, "sed -i 's/return {.id.: uid}/return uid/' src/user.py", "--once", "--strict")
    assert res.code == 0 and json.loads(res.out)["jobs"][0]["result"] == "ok", res.out + res.err
    assert run_genjob("show", k, "--log", cwd=repo).code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    git(repo, "push", "-q", "origin", "main")
    assert run_genjob("push", "origin", cwd=repo).code == 0
    # a second job whose outputs no longer merge once a teammate edits the same line
    two = submit_key(repo, "-m", "Return a dict again", "src/user.py")
    res = work(repo, key, "sed -i 's/return uid/return {\"id\": uid}/' src/user.py", "--once", "--strict")
    assert res.code == 0, res.out + res.err
    (repo / "src/user.py").write_text("def fetch_user(uid):\n    return ('user', uid)\n")
    git(repo, "commit", "-qam", "a teammate's edit of the same line")
    git(repo, "push", "-q", "origin", "main")
    assert run_genjob("push", "origin", cwd=repo).code == 0
    assert run_genjob("apply", two, cwd=repo).code == 1  # does not merge
    res = run_genjob("resubmit", two, "--remote", "origin", "--json", cwd=repo)
    assert res.code == 0, res.err
    new = json.loads(res.out)["new"]
    # the teammate's clone
    git(tmp_path, "clone", "-q", str(bare), "teammate")
    mate = tmp_path / "teammate"
    assert run_genjob("init", cwd=mate).code == 0
    git(mate, "checkout", "-q", ".genjob")  # init trusted this HOME's planner key: already on the branch
    assert run_genjob("fetch", "origin", cwd=mate).code == 0
    rows = {r["key"]: r["state"] for r in json.loads(run_genjob("status", "--all", "--json", cwd=mate).out)}
    assert rows == {k: "applied", two: "superseded", new: "queued"}, rows
    logged = run_genjob("log", cwd=mate)
    assert logged.code == 0 and k in logged.out
    assert run_genjob("audit", cwd=mate).code == 0
    for clone in (repo, mate):
        res = run_genjob("doctor", "--json", cwd=clone)
        failed = [c for c in json.loads(res.out)["checks"] if c["status"] == "fail"]
        assert res.code == 0 and failed == [], failed
