"""Red team of `work --remote` after issue 24 (a fetch only when the view is old or contended,
a receipt riding in the next claim's push, one transaction per fetch).

Real bare remotes, real clones, real keys, `git genjob` as separate processes where a process
boundary matters. A finding is a test marked xfail(strict=True) until it is fixed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from git_genjob.storage.store import Store
from git_genjob.worker.run import work
from tests.helpers.common import git, run_genjob
from tests.storage.test_remote_view import _fleet, _Meanwhile, _worker

# `git genjob` as its own process (RT_OLD=DIR runs the code in DIR instead: how a finding was
# checked against the code before the change)
GENJOB = [
    sys.executable,
    "-c",
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from git_genjob.entry import main; sys.exit(main())",
    os.environ.get("RT_OLD", str(Path(__file__).resolve().parents[2])),
]


def _work_process(
    clone: Path, planner: Path, key: Path, *extra: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *GENJOB,
            "work",
            "--remote",
            "origin",
            "--worker-id",
            "wa",
            "--signing-key",
            str(key),
            "--allowed-signers",
            str(planner / ".genjob" / "allowed_signers"),
            "--no-sandbox",
            *extra,
        ],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def _decline(bare: Path, message: str) -> None:
    """A pre-receive hook on the remote that refuses every push (a forge's policy, a quota)."""
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    hook.chmod(0o755)


def test_a_remote_whose_hook_refuses_every_push_ends_the_worker(tmp_path: Path) -> None:
    bare, planner, key, (wa, _) = _fleet(tmp_path, 2)
    _decline(bare, "refs/genjob is read-only here")
    before = git(bare, "for-each-ref", "refs/genjob/")
    proc = _work_process(wa, planner, key, "--generator", "exec:echo x > src/user.py", "--json", timeout=15)
    # the remote said no: no race was lost, so the worker stops and says what the remote said
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "refs/genjob is read-only here" in proc.stdout + proc.stderr
    assert git(bare, "for-each-ref", "refs/genjob/") == before


def test_a_worker_names_each_refused_claim_once_and_stops_after_three_in_a_row(tmp_path: Path) -> None:
    """Issue 34, bad input: a remote whose pre-receive hook refuses every push. The worker says so
    once per job, goes on to the next, and stops after MAX_REFUSALS (3) refusals in a row with
    exit 1 and a hint; the remote is unchanged and this clone holds no claim the remote lacks."""
    from git_genjob.worker.run import MAX_REFUSALS

    bare, planner, key, (wa, _) = _fleet(tmp_path, 5)
    _decline(bare, "pushes to refs/genjob are closed")
    before = git(bare, "for-each-ref", "refs/genjob/")
    proc = _work_process(wa, planner, key, "--generator", "exec:echo x > src/user.py", timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"origin refused {MAX_REFUSALS} claims in a row; this worker stops" in proc.stderr, proc.stderr
    assert "ask its admin" in proc.stderr  # the hint
    named = [f"job r{i}:" for i in range(5) if f"job r{i}:" in proc.stderr]
    assert len(named) == MAX_REFUSALS and "pushes to refs/genjob are closed" in proc.stderr, proc.stderr
    for line in named:  # each refused job once, then the worker stopped (the 4th and 5th never tried)
        assert proc.stderr.count(line) == 1, proc.stderr
    assert git(bare, "for-each-ref", "refs/genjob/") == before
    local = dict(
        line.split(" ", 1)[::-1]
        for line in git(wa, "for-each-ref", "--format=%(objectname) %(refname)", "refs/genjob/jobs/").splitlines()
    )
    remote = dict(
        line.split(" ", 1)[::-1]
        for line in git(bare, "for-each-ref", "--format=%(objectname) %(refname)", "refs/genjob/jobs/").splitlines()
    )
    assert local == remote  # every job here as the remote holds it: queued, claimed by no one


def test_refused_claims_short_of_the_limit_are_named_and_exit_1(tmp_path: Path) -> None:
    """Two jobs, both refused: fewer than MAX_REFUSALS, so the worker reports each and ends the
    queue (exit 1: a job's claim was refused), the remote unchanged."""
    bare, planner, key, (wa, _) = _fleet(tmp_path, 2)
    _decline(bare, "quota exceeded")
    before = git(bare, "for-each-ref", "refs/genjob/")
    proc = _work_process(wa, planner, key, "--generator", "exec:echo x > src/user.py", "--json", timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    jobs = json.loads(proc.stdout)["jobs"]
    assert sorted((j["key"], j["result"]) for j in jobs) == [("r0", "refused"), ("r1", "refused")], jobs
    assert all("quota exceeded" in j["reason"] for j in jobs)
    assert git(bare, "for-each-ref", "refs/genjob/") == before


def test_a_held_receipt_a_remote_hook_refuses_is_not_called_fenced(tmp_path: Path) -> None:
    bare, planner, key, (wa, _) = _fleet(tmp_path, 2)
    """A receipt the remote's hook refused was reported `fenced` ('the remote moved'), and the worker
    went on claiming, each claim `lost`, for ever: no lease decided either."""
    policy = tmp_path / "policy"
    policy.write_text("#!/bin/sh\necho quota exceeded >&2\nexit 1\n")
    policy.chmod(0o755)
    # r0's generator answers, then the remote starts refusing every push (its admin's new policy)
    gen = f"exec:sh -c 'echo x > src/user.py; cp {policy} {bare}/hooks/pre-receive'"
    proc = _work_process(wa, planner, key, "--generator", gen, "--json", timeout=15)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = json.loads(proc.stderr)  # --json: the error document
    assert "quota exceeded" in err["error"] and "fenced" not in proc.stdout + proc.stderr
    # r0's receipt never reached the remote: it stays sending (recover holds it unknown), r1 queued
    assert json.loads(git(bare, "show", "refs/genjob/jobs/r0:attempts.json"))["state"] == "sending"
    assert git(bare, "rev-parse", "refs/genjob/jobs/r1") == git(planner, "rev-parse", "refs/genjob/jobs/r1")


def _fd_limit(n: int):  # type: ignore[no-untyped-def]
    """A preexec_fn: a soft limit of `n` open files (macOS's default is 256, many Linux hosts 1024)."""
    import resource

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    return apply


def test_a_fresh_clone_fetches_more_jobs_than_it_may_open_files(tmp_path: Path) -> None:
    """One ref transaction per fetch locks every job ref the remote advanced at once, and libgit2
    holds a lock file open per locked ref: a fresh worker clone of a remote with more live jobs
    than its open-file limit could not fetch at all (SPEC §3: 100,000 jobs in one repository)."""
    from git_genjob.planner.queue import submit
    from git_genjob.storage.store import Store

    bare, planner, key, (wa, _) = _fleet(tmp_path, 0)
    store = Store.open(str(planner))
    for i in range(300):
        submit(store, f"job {i}", ["src/user.py"], key=f"r{i}")
    assert run_genjob("push", cwd=planner).code == 0
    proc = subprocess.run(
        [*GENJOB, "fetch", "origin", "--json"],
        cwd=wa,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        preexec_fn=_fd_limit(256),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(json.loads(proc.stdout)["created"]) == 300
    assert git(wa, "for-each-ref", "--count=400", "refs/genjob/jobs/").count("\n") == 300


def test_a_keyless_ref_under_refs_genjob_notes_stops_no_worker(tmp_path: Path) -> None:
    """A keyless clone with push access adds refs/genjob/notes/genjob beside the remote's real
    refs/notes/genjob: both mapped to one tracking ref, so every fetch failed (exit 3, 'check that
    the remote exists and is reachable') and no worker, recover or fetch could run."""
    bare, planner, key, (wa, attacker) = _fleet(tmp_path, 1)
    git(planner, "notes", "--ref=genjob", "add", "-m", "a reviewer's note", "HEAD")
    git(planner, "push", "-q", "origin", "refs/notes/genjob")
    git(attacker, "commit", "-q", "--allow-empty", "-m", "anything")
    git(attacker, "push", "-q", "origin", "HEAD:refs/genjob/notes/genjob")
    proc = _work_process(wa, planner, key, "--generator", "exec:echo x > src/user.py", "--json", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [(o["key"], o["result"]) for o in json.loads(proc.stdout)["jobs"]] == [("r0", "ok")]
    assert json.loads(git(bare, "show", "refs/genjob/jobs/r0:attempts.json"))["state"] == "done"
    assert git(wa, "rev-parse", "refs/genjob/jobs/r0") == git(bare, "rev-parse", "refs/genjob/jobs/r0")
    # the remote's notes are the planner's, held for fetch's quarantine (SPEC §12.2: a worker takes
    # no notes); the ref the keyless clone added is nobody's notes here
    held = git(wa, "rev-parse", "refs/genjob-remotes/origin/notes/genjob")
    assert held == git(planner, "rev-parse", "refs/notes/genjob")
    assert git(wa, "rev-parse", "-q", "--verify", "refs/notes/genjob", check=False) == ""


def test_a_keyless_ref_under_refs_genjob_notes_leaves_plain_git_fetch_working(tmp_path: Path) -> None:
    """SPEC §3: the refspecs init adds never make a plain `git fetch` fail. They name the refs
    genjob writes (a broad +refs/genjob/* tracked refs/genjob/notes/genjob where
    +refs/notes/genjob* does, and git refused the fetch); init replaces an earlier broad one."""
    bare, planner, key, (wa, attacker) = _fleet(tmp_path, 1)
    specs = git(planner, "config", "--get-all", "remote.origin.fetch").split()
    assert "+refs/genjob/*:refs/genjob-remotes/origin/*" not in specs
    assert "+refs/genjob/jobs/*:refs/genjob-remotes/origin/jobs/*" in specs
    git(planner, "config", "--add", "remote.origin.fetch", "+refs/genjob/*:refs/genjob-remotes/origin/*")
    assert run_genjob("init", cwd=planner).code == 0  # an earlier init's broad spec: replaced
    broad = "+refs/genjob/*:refs/genjob-remotes/origin/*"
    assert broad not in git(planner, "config", "--get-all", "remote.origin.fetch").split()
    git(planner, "notes", "--ref=genjob", "add", "-m", "a reviewer's note", "HEAD")
    git(planner, "push", "-q", "origin", "refs/notes/genjob")
    git(attacker, "commit", "-q", "--allow-empty", "-m", "anything")
    git(attacker, "push", "-q", "origin", "HEAD:refs/genjob/notes/genjob")
    git(planner, "fetch", "-q", "origin")  # exits non-zero (and fails the test) if git refuses it
    assert (
        git(planner, "rev-parse", "refs/genjob-remotes/origin/notes/genjob").strip()
        == git(planner, "rev-parse", "refs/notes/genjob").strip()
    )  # the real notes, not the attacker's commit
    assert run_genjob("fetch", cwd=planner).code == 0


def test_a_keyless_ref_below_a_job_ref_this_clone_holds_stops_no_worker(tmp_path: Path) -> None:
    """A keyless clone with push access deletes live job r0 on the remote and pushes a ref
    below its name: every clone that still held r0 crashed on every fetch, so no worker ran."""
    bare, planner, key, (wa, attacker) = _fleet(tmp_path, 2)
    assert run_genjob("fetch", "origin", cwd=wa).code == 0  # wa knows r0 and r1
    git(attacker, "commit", "-q", "--allow-empty", "-m", "anything")
    git(attacker, "push", "-q", "origin", ":refs/genjob/jobs/r0")
    git(attacker, "push", "-q", "origin", "HEAD:refs/genjob/jobs/r0/x")
    proc = _work_process(wa, planner, key, "--generator", "exec:echo x > src/user.py", "--json", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # r0 is gone from the remote: never claimed from this clone's old view of it
    assert [(o["key"], o["result"]) for o in json.loads(proc.stdout)["jobs"]] == [("r1", "ok")]
    assert json.loads(git(bare, "show", "refs/genjob/jobs/r1:attempts.json"))["state"] == "done"
    assert git(wa, "for-each-ref", "refs/genjob/jobs/r0/") == ""  # the keyless ref was not imported


def test_a_riding_receipt_the_remote_took_before_the_connection_died_is_published_not_lost(tmp_path: Path) -> None:
    """What held: the remote's receive-pack dies after it moved r0's receipt (the push that
    carries it with r1's claim), before it reports. The worker cannot tell, puts the receipt
    back, and its flush on the way out finds the remote holding it (`=` up to date): published,
    and the worker's own ref for r0 agrees with the remote's; the worker says the remote failed
    (exit 3) and r1 was claimed at most once."""
    bare, planner, key, (wa, _) = _fleet(tmp_path, 2)
    count = tmp_path / "committed"
    count.write_text("")
    hook = bare / "hooks" / "reference-transaction"  # per ref: a push that is not --atomic
    hook.write_text(
        f'#!/bin/sh\n[ "$1" = committed ] || exit 0\necho x >> {count}\n'
        f"[ $(wc -l < {count}) = 2 ] && kill -9 $PPID\nexit 0\n"  # the second ref the remote moved
    )
    hook.chmod(0o755)
    proc = _work_process(wa, planner, key, "--generator", "exec:echo x > src/user.py", "--json", timeout=60)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert json.loads(git(bare, "show", "refs/genjob/jobs/r0:attempts.json"))["state"] == "done"
    assert git(wa, "rev-parse", "refs/genjob/jobs/r0") == git(bare, "rev-parse", "refs/genjob/jobs/r0")
    assert run_genjob("fetch", cwd=planner).code == 0
    assert run_genjob("verify", "r0", cwd=planner).code == 0
    claims = [
        e for e in json.loads(run_genjob("show", "r1", "--json", cwd=planner).out)["events"] if e["event"] == "claimed"
    ]
    assert len(claims) <= 1


def test_a_receipt_held_when_the_remote_goes_away_is_named_in_the_error(tmp_path: Path) -> None:
    """r0's receipt waits for r1's claim push; the remote is gone by then (a network cut). The
    receipt is not published (r0 stays sending, for recover), and the worker must say so: the
    error named only the failed push, so nothing told its user that r0's receipt was lost."""
    bare, planner, key, (wa, _) = _fleet(tmp_path, 2)
    gone = tmp_path / "remote.gone"
    gen = f"exec:sh -c 'echo x > src/user.py; mv {bare} {gone}'"  # r0's generator answers, then the cut
    proc = _work_process(wa, planner, key, "--generator", gen, "--json", timeout=60)
    gone.rename(bare)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert json.loads(git(bare, "show", "refs/genjob/jobs/r0:attempts.json"))["state"] == "sending"
    err = json.loads(proc.stderr)
    assert any("r0" in line and "not published" in line for line in err["details"]), err


def _swap_input(attacker: Path, bare: Path, key: str) -> str:
    """A keyless clone appends a commit to job `key` on the remote with other bytes for its input."""
    git(attacker, "fetch", "-q", str(bare), f"+refs/genjob/jobs/{key}:refs/x/{key}")
    index = {**os.environ, "GIT_INDEX_FILE": str(attacker / ".git" / "forge.index")}
    subprocess.run(["git", "read-tree", f"refs/x/{key}"], cwd=attacker, env=index, check=True)
    blob = git(attacker, "hash-object", "-w", "--stdin", input="print('pwned')\n").strip()
    info = f"100644,{blob},inputs/src/user.py"
    subprocess.run(["git", "update-index", "--cacheinfo", info], cwd=attacker, env=index, check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=attacker, env=index, check=True, capture_output=True, text=True)
    forged = git(attacker, "commit-tree", "-p", f"refs/x/{key}", "-m", f"genjob: submitted {key}", tree.stdout.strip())
    git(attacker, "push", "-q", str(bare), f"{forged.strip()}:refs/genjob/jobs/{key}")
    return forged.strip()


def test_a_job_a_keyless_clone_rewrites_after_the_workers_fetch_is_never_claimed(tmp_path: Path) -> None:
    """What held: r1 is queued in the worker's view (no fetch for age); while it generates r0, a
    keyless clone appends swapped input bytes to r1 on the remote. The claim of r1 is leased on
    the tip the worker vetted, so it loses; the worker fetches, finds r1 damaged and never claims it."""
    bare, planner, key, (wa, attacker) = _fleet(tmp_path, 3)
    forged: list[str] = []
    gen = _Meanwhile([lambda: forged.append(_swap_input(attacker, bare, "r1"))])
    report = work(Store.open(str(wa)), _worker(gen, planner, key, refresh_s=600))
    got = [(o.key, o.result) for o in report.outcomes]
    assert got[:2] == [("r0", "ok"), ("r1", "lost")] and ("r2", "ok") in got, got
    assert {r for k, r in got if k == "r1"} <= {"lost", "damaged"}, got
    assert git(bare, "rev-parse", "refs/genjob/jobs/r1").strip() == forged[0]  # nothing claimed on top of it
    assert git(wa, "rev-parse", "refs/genjob/jobs/r1").strip() == forged[0]
    for k in ("r0", "r2"):
        assert json.loads(git(bare, "show", f"refs/genjob/jobs/{k}:attempts.json"))["state"] == "done"


@pytest.mark.parametrize(
    ("fault", "after"),
    [
        ("after-claim@2", {"r0": "unknown", "r1": "done"}),  # r0's receipt held, r1's claim not out: both lost
        ("after-push@2", {"r0": "done", "r1": "unknown"}),  # the push with both acknowledged, no local ref moved
        ("after-sending@2", {"r0": "done", "r1": "unknown"}),  # r1 sending published: its outcome is uncertain
    ],
)
def test_a_worker_killed_with_a_receipt_held_leaves_each_job_for_recover(
    tmp_path: Path, fault: str, after: dict[str, str]
) -> None:
    """What held: kill -9 at each step around the push that carries r0's receipt with r1's
    claim. A receipt never published leaves its job `sending`, which recover holds `unknown`
    (never resent); nothing is claimed twice, and the same clone's next run agrees with the remote."""
    import time

    bare, planner, key, (wa, _) = _fleet(tmp_path, 2)
    args = ("--generator", "exec:echo x > src/user.py", "--lease", "1s")
    killed = _work_process(wa, planner, key, *args, env={"GENJOB_FAULT": fault})
    assert killed.returncode == -9, killed.stdout + killed.stderr
    time.sleep(1.5)  # the lease lapses
    assert run_genjob("recover", "--remote", "origin", cwd=planner).code == 0
    again = _work_process(wa, planner, key, *args, "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert run_genjob("fetch", cwd=planner).code == 0
    for k, state in after.items():
        shown = json.loads(run_genjob("show", k, "--json", cwd=planner).out)
        assert shown["state"] == state, (k, shown["state"])
        assert len([e for e in shown["events"] if e["event"] == "claimed"]) == 1, k
        assert git(wa, "rev-parse", f"refs/genjob/jobs/{k}") == git(bare, "rev-parse", f"refs/genjob/jobs/{k}")
        if state == "done":
            assert run_genjob("verify", k, cwd=planner).code == 0


def test_a_waiting_worker_publishes_its_last_receipt_before_it_waits(tmp_path: Path) -> None:
    """What held: `work --wait` holds no receipt while it polls an empty queue: r0's receipt is on
    the remote while the worker waits, and a SIGTERM then is exit 130 with nothing held."""
    import signal
    import time

    bare, planner, key, (wa, _) = _fleet(tmp_path, 1)
    cmd = [*GENJOB, "work", "--remote", "origin", "--wait", "--signing-key", str(key), "--no-sandbox"]
    cmd += [
        "--allowed-signers",
        str(planner / ".genjob" / "allowed_signers"),
        "--generator",
        "exec:echo x > src/user.py",
    ]
    proc = subprocess.Popen(cmd, cwd=wa, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        state = None
        while time.monotonic() < deadline and state != "done":
            shown = git(bare, "show", "refs/genjob/jobs/r0:attempts.json", check=False)
            state = json.loads(shown)["state"] if shown else None
            time.sleep(0.2)
        assert state == "done"  # published while the worker lives on, waiting for work
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert git(wa, "rev-parse", "refs/genjob/jobs/r0") == git(bare, "rev-parse", "refs/genjob/jobs/r0")


def test_a_held_receipt_whose_job_ref_a_keyless_clone_deleted_is_fenced_not_ok(tmp_path: Path) -> None:
    """What held: while r0 generates, a keyless clone deletes r0's ref on the remote. Its receipt,
    riding in r1's claim push, meets no ref under its lease (`stale info`): reported fenced (exit
    4), never ok, and nothing re-creates r0 there; r1's claim beside it stands."""
    bare, planner, key, (wa, attacker) = _fleet(tmp_path, 2)
    gen = _Meanwhile([lambda: git(attacker, "push", "-q", str(bare), ":refs/genjob/jobs/r0")])
    report = work(Store.open(str(wa)), _worker(gen, planner, key, refresh_s=600))
    assert {o.key: o.result for o in report.outcomes} == {"r0": "fenced", "r1": "ok"}, report.outcomes
    assert report.exit_code == 4
    assert git(bare, "for-each-ref", "refs/genjob/jobs/r0") == ""
    assert json.loads(git(bare, "show", "refs/genjob/jobs/r1:attempts.json"))["state"] == "done"
