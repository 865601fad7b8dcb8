"""`git genjob doctor` (issue 35, SPEC §12.4): each check says what it found and the fix, and
exit 1 only when one fails. Real repositories, a real bare remote, the real sandbox probes."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers.common import (
    git,
    refs,
    repo_with_remote,
    run_genjob,
    run_genjob_process,
    setup_worker,
    submit_key,
    work,
)


def checks(repo: Path) -> tuple[int, dict[str, tuple[str, str, str]]]:
    res = run_genjob("doctor", "--json", cwd=repo)
    doc = json.loads(res.out)
    assert doc["ok"] == (res.code == 0)
    return res.code, {c["name"]: (c["status"], c["detail"], c["fix"]) for c in doc["checks"]}


def test_a_set_up_clone_passes_every_check(tmp_path: Path) -> None:
    bare, repo = repo_with_remote(tmp_path)
    key = setup_worker(repo)
    git(repo, "config", "genjob.signingKey", str(key))
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert work(repo, key, "echo 'x = 1' > src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    before = refs(repo)
    code, found = checks(repo)
    assert code == 0, found
    assert found["sandbox"][0] == "ok" and found["sandbox.bwrap"][0] == "ok", found
    assert found["keys.planner"][0] == "ok" and "trusted to plan" in found["keys.planner"][1]
    assert found["keys.worker"] == ("ok", f"{key} ({found['keys.worker'][1].split('(')[1]}", "")
    assert found["trust-store"][0] == "ok" and "may plan" in found["trust-store"][1]
    assert found["notes"][0] == "ok"
    assert {found[f"hooks.{h}"][0] for h in ("pre-commit", "commit-msg", "pre-push", "pre-apply")} == {"ok"}
    assert found["gateway"][0] == "skip" and "no gateway configured" in found["gateway"][1]
    assert refs(repo) == before  # doctor writes nothing
    human = run_genjob("doctor", cwd=repo)
    assert human.code == 0 and any(line.startswith("ok   trust-store") for line in human.out.splitlines())


def test_a_stale_clone_fails_the_trust_store_and_notes_checks_with_their_fixes(tmp_path: Path) -> None:
    bare, repo = repo_with_remote(tmp_path)
    git(tmp_path, "clone", "-q", str(bare), "stale")  # before .genjob/ and any genjob commit
    stale = tmp_path / "stale"
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert work(repo, key, "echo 'x = 1' > src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    git(repo, "push", "-q", "origin", "main")
    assert run_genjob("push", "origin", cwd=repo).code == 0
    code, found = checks(stale)
    assert code == 1
    status, detail, fix = found["trust-store"]
    assert status == "fail" and "missing from this checkout" in detail and fix.startswith("git pull")
    assert "--allowed-signers FILE" in fix
    git(stale, "pull", "-q", "--no-rebase", "origin", "main")  # plain git: the genjob commit, not its notes
    code, found = checks(stale)
    assert found["trust-store"][0] == "ok"
    assert found["notes"][0] == "fail" and found["notes"][2] == "git genjob fetch", found["notes"]
    assert code == 1
    assert run_genjob("fetch", "origin", cwd=stale).code == 0
    code, found = checks(stale)
    assert found["notes"][0] == "ok", found["notes"]
    human = run_genjob("doctor", cwd=stale)
    assert "fail" not in {line[:4] for line in human.out.splitlines()} and human.code == code


def test_a_stale_hook_fails_and_a_refspec_taking_the_notes_warns(tmp_path: Path) -> None:
    bare, repo = repo_with_remote(tmp_path)
    setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    hook = repo / ".git/hooks/pre-push"
    hook.write_text(hook.read_text().replace(sys.executable, "/opt/old-venv/bin/python"))
    git(repo, "config", "--add", "remote.origin.fetch", "+refs/notes/*:refs/notes/*")
    code, found = checks(repo)
    assert code == 1
    assert found["hooks.pre-push"] == (
        "fail",
        "genjob's, but written for another install (interpreter or package)",
        "git genjob init --hooks",
    )
    assert found["hooks.pre-commit"][0] == "ok"
    status, detail, _ = found["remote.origin"]
    assert status == "warn" and "+refs/notes/*:refs/notes/*" in detail
    assert run_genjob("init", "--hooks", cwd=repo).code == 0  # the fix it names
    assert checks(repo)[1]["hooks.pre-push"][0] == "ok"


def test_no_planner_key_warns_with_keygen_planner(tmp_path: Path) -> None:
    from tests.helpers.common import drop_planner_key, make_repo

    repo = make_repo(tmp_path / "repo")
    setup_worker(repo)
    drop_planner_key()
    _, found = checks(repo)
    status, detail, fix = found["keys.planner"]
    assert status == "warn" and "no planner key" in detail and "submit refuses" in detail
    assert fix == "git genjob keygen --planner"


def test_without_bubblewrap_the_sandbox_checks_say_so_and_the_refusal_points_at_doctor(tmp_path: Path) -> None:
    """PATH without bwrap: no fake pass. As root Landlock is never chosen by itself, so the
    sandbox check fails (exit 1), with the fix `work` gives, whose hint ends in git genjob doctor."""
    from tests.helpers.common import make_repo

    repo = make_repo(tmp_path / "repo")
    setup_worker(repo)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("git", "sh", "setpriv"):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    env = {"PATH": str(bindir)}
    res = run_genjob_process("doctor", "--json", cwd=repo, env=env)
    doc = {c["name"]: c for c in json.loads(res.out)["checks"]}
    assert doc["sandbox.bwrap"]["status"] == "warn" and doc["sandbox.bwrap"]["detail"] == "bubblewrap is not installed"
    assert "apt-get install bubblewrap" in doc["sandbox.bwrap"]["fix"]
    if os.geteuid() == 0:
        assert res.code == 1 and doc["sandbox"]["status"] == "fail", doc["sandbox"]
        assert doc["sandbox"]["fix"].endswith("git genjob doctor")
    else:  # a user's Landlock is chosen when bwrap is missing
        assert doc["sandbox"]["status"] in ("ok", "fail")
    k = submit_key(repo, "-m", "x", "src/user.py")
    key = repo.parent / "keys" / "w1"
    before = refs(repo)
    res = run_genjob_process("work", "--generator", "exec:true", "--signing-key", str(key), "--once", cwd=repo, env=env)
    if os.geteuid() == 0:  # refused before any claim: the hint sends the user to doctor
        assert res.code == 2 and res.err.rstrip().endswith("git genjob doctor"), res.err
        assert refs(repo) == before and k in run_genjob("status", cwd=repo).out


def test_the_gateway_check_reaches_each_configured_upstream_with_the_workers_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC §12.4: doctor checks each `[gateway.NAME]` upstream is reachable with the key the
    worker holds, fails an unreachable one, and warns when the key variable is unset."""
    import socket

    from tests.helpers.stubprovider import Stub

    stub = Stub()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    _, repo = repo_with_remote(tmp_path)
    setup_worker(repo)
    (repo / ".genjob" / "config.toml").write_text(
        f'[gateway.openai]\nupstream = "{stub.url}"\n\n[gateway.local]\nupstream = "{dead}"\n'
        'dialect = "openai"\nkey_env = "LOCAL_KEY"\n'
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-0123456789")
    monkeypatch.delenv("LOCAL_KEY", raising=False)
    code, found = checks(repo)
    assert found["gateway.openai"][0] == "ok" and "answers" in found["gateway.openai"][1], found
    assert stub.requests[-1] == {"path": "/v1/models", "auth": "Bearer sk-doctor-0123456789", "body": None}
    assert found["gateway.local"][0] == "fail" and "unreachable" in found["gateway.local"][1]
    assert found["gateway.local.key"][0] == "warn" and "LOCAL_KEY" in found["gateway.local.key"][1]
    assert code == 1
    human = run_genjob("doctor", cwd=repo).out
    assert "sk-doctor" not in human and "fail gateway.local" in human
    stub.close()


# From tests/test_newcomer.py: a newcomer's first day (issue 11).
def test_the_first_hour_end_to_end_with_a_team_and_doctor_all_ok(tmp_path: Path) -> None:
    """Issue 35's walk (the parts this package owns; install.sh is tests/contract/test_install.py): a fresh
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
