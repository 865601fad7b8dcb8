"""A remote worker claims from the view of its last fetch (issue 24): it fetches again only when
that view is older than `refresh_s`, after a lost race, or before it says the queue is empty.

What never changes: the claim goes out in a push leased on the tip the worker fetched and
vetted, so a job another worker took since is a rejected push (a lost race), never a second
claim. Real bare remote, real git, a second worker as its own process.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

from git_genjob.documents.keys import read_signing_key
from git_genjob.storage.store import Store
from git_genjob.worker.generators.base import GenContext, GenResult
from git_genjob.worker.run import WorkerOptions, work
from tests.helpers.common import git, repo_with_remote, run_genjob, run_genjob_process, setup_worker


class _Meanwhile:
    """A generator that writes its answer and, during its i-th job, runs `during[i]()` (if any):
    what other machines do on the remote while this worker generates. `seen` keeps, per job, the
    state the remote held for it when the generator started."""

    kind = "exec"
    endpoint: str | None = None
    model: str | None = None
    command: str | None = "meanwhile"

    def __init__(self, during, bare: Path | None = None):  # type: ignore[no-untyped-def]
        self.during, self.calls, self.bare = during, 0, bare
        self.seen: dict[str, str] = {}

    def describe(self) -> dict[str, str | None]:
        return {"kind": self.kind, "endpoint": None, "model": None, "command": self.command}

    def generate(self, ctx: GenContext) -> GenResult:
        self.calls += 1
        if self.bare is not None:
            doc = json.loads(git(self.bare, "show", f"refs/genjob/jobs/{ctx.job.key}:attempts.json"))
            self.seen[ctx.job.key] = doc["state"]
        if self.calls <= len(self.during):
            self.during[self.calls - 1]()
        (Path(ctx.scratch) / "src" / "user.py").write_text(f"by {ctx.job.key}\n")
        return GenResult("ok")


def _fleet(tmp_path: Path, n_jobs: int) -> tuple[Path, Path, Path, list[Path]]:
    """(bare remote, planner, worker key, two worker clones) with `n_jobs` queued jobs pushed."""
    from git_genjob.planner.queue import submit

    bare, planner = repo_with_remote(tmp_path, "planner")
    key = setup_worker(planner)
    store = Store.open(str(planner))
    for i in range(n_jobs):
        submit(store, f"job {i}", ["src/user.py"], key=f"r{i}")
    assert run_genjob("push", cwd=planner).code == 0
    clones = []
    for name in ("wa", "wb"):
        clone = tmp_path / name
        git(tmp_path, "init", "-q", str(clone))
        git(clone, "remote", "add", "origin", str(bare))
        clones.append(clone)
    return bare, planner, key, clones


def _attempts(planner: Path, key: str) -> list[dict]:  # type: ignore[type-arg]
    doc = json.loads(run_genjob("show", key, "--json", cwd=planner).out)
    return [e for e in doc["events"] if e["event"] == "claimed"]


def _other_worker(clone: Path, planner: Path, key: Path, takes: str | None) -> None:
    res = run_genjob_process(
        "work",
        "--remote",
        "origin",
        "--max-jobs",
        "1",
        "--worker-id",
        "wb",
        "--generator",
        "exec:echo wb > src/user.py",
        "--signing-key",
        str(key),
        "--allowed-signers",
        str(planner / ".genjob" / "allowed_signers"),
        "--json",
        cwd=clone,
    )
    assert res.code == 0, res.err
    took = [o["key"] for o in json.loads(res.out)["jobs"]]
    assert len(took) == 1 and took[0] == (takes or took[0])  # the oldest queued: not the one being generated


def test_a_claim_from_an_old_view_loses_at_the_remote_then_the_worker_fetches(tmp_path: Path) -> None:
    bare, planner, key, (wa, wb) = _fleet(tmp_path, 3)
    gen = _Meanwhile([lambda: _other_worker(wb, planner, key, "r1")])
    opts = WorkerOptions(
        gen,  # type: ignore[arg-type]
        read_signing_key(str(key)),
        "wa",
        remote="origin",
        trust_file=str(planner / ".genjob" / "allowed_signers"),
        refresh_s=600,  # no fetch for age: only the lost race makes this worker fetch
    )
    report = work(Store.open(str(wa)), opts)
    got = [(o.key, o.result) for o in report.outcomes]
    # r1 was queued in this worker's view, taken by wb since: the leased push lost, then a fetch;
    # r0's receipt went out in that same push, and stands
    assert got == [("r0", "ok"), ("r1", "lost"), ("r2", "ok")], got
    assert run_genjob("fetch", cwd=planner).code == 0
    for k, worker in (("r0", "wa"), ("r1", "wb"), ("r2", "wa")):
        claims = _attempts(planner, k)
        assert len(claims) == 1, (k, claims)  # claimed once: no double claim
        doc = json.loads(run_genjob("show", k, "--json", cwd=planner).out)
        assert doc["state"] == "done", doc
        assert run_genjob("verify", k, cwd=planner).code == 0
        envelope = json.loads(git(planner, "show", f"refs/genjob/jobs/{k}:receipt.json"))
        assert json.loads(base64.b64decode(envelope["payload"]))["predicate"]["worker_id"] == worker
    # what the loser built for r1 stayed local objects: the remote holds wb's chain, and the
    # loser's own ref for r1 follows the remote's
    assert git(bare, "rev-parse", "refs/genjob/jobs/r1") == git(planner, "rev-parse", "refs/genjob/jobs/r1")
    assert git(wa, "rev-parse", "refs/genjob/jobs/r1") == git(bare, "rev-parse", "refs/genjob/jobs/r1")


def test_a_worker_fetches_before_it_says_the_queue_is_empty(tmp_path: Path) -> None:
    bare, planner, key, (wa, _) = _fleet(tmp_path, 1)

    def submit_another() -> None:  # the planner queues r1 while wa generates r0
        from git_genjob.planner.queue import submit

        submit(Store.open(str(planner)), "job 1", ["src/user.py"], key="r1")
        assert run_genjob_process("push", cwd=planner).code == 0

    opts = WorkerOptions(
        _Meanwhile([submit_another]),  # type: ignore[arg-type]
        read_signing_key(str(key)),
        "wa",
        remote="origin",
        trust_file=str(planner / ".genjob" / "allowed_signers"),
        refresh_s=600,
    )
    report = work(Store.open(str(wa)), opts)
    assert [(o.key, o.result) for o in report.outcomes] == [("r0", "ok"), ("r1", "ok")]
    assert run_genjob("fetch", cwd=planner).code == 0
    for k in ("r0", "r1"):
        assert len(_attempts(planner, k)) == 1
        assert json.loads(run_genjob("show", k, "--json", cwd=planner).out)["state"] == "done"


def _log_pushes(bare: Path) -> Path:
    """A post-receive hook on the remote: one line per push, the refs it moved."""
    log = bare / "pushes.log"
    hook = bare / "hooks" / "post-receive"
    hook.write_text(f"#!/bin/sh\nawk '{{print $3}}' | sort | tr '\\n' ' ' >> {log}\necho >> {log}\n")
    hook.chmod(0o755)
    return log


def _worker(gen: _Meanwhile, planner: Path, key: Path, **kw) -> WorkerOptions:  # type: ignore[no-untyped-def]
    trust = str(planner / ".genjob" / "allowed_signers")
    return WorkerOptions(gen, read_signing_key(str(key)), "wa", remote="origin", trust_file=trust, **kw)  # type: ignore[arg-type]


def test_each_receipt_goes_out_in_the_next_claims_push_and_sending_before_the_generator(tmp_path: Path) -> None:
    bare, planner, key, (wa, _) = _fleet(tmp_path, 3)
    log = _log_pushes(bare)
    gen = _Meanwhile([], bare)
    report = work(Store.open(str(wa)), _worker(gen, planner, key))
    assert [(o.key, o.result) for o in report.outcomes] == [("r0", "ok"), ("r1", "ok"), ("r2", "ok")]
    # the remote held each job as `sending` before its generator started (SPEC: durable, published)
    assert gen.seen == {"r0": "sending", "r1": "sending", "r2": "sending"}
    j = "refs/genjob/jobs/"
    assert log.read_text().split("\n")[:-1] == [
        f"{j}r0 ",  # the claim with its sending
        f"{j}r0 {j}r1 ",  # r0's receipt, r1's claim with its sending: one push, a lease each
        f"{j}r1 {j}r2 ",
        f"{j}r2 ",  # the last receipt: no next claim, so on its own before the worker exits
    ]
    assert run_genjob("fetch", cwd=planner).code == 0
    for k in ("r0", "r1", "r2"):
        assert json.loads(run_genjob("show", k, "--json", cwd=planner).out)["state"] == "done"
        assert run_genjob("verify", k, cwd=planner).code == 0
        assert git(wa, "rev-parse", f"{j}{k}") == git(bare, "rev-parse", f"{j}{k}")


def test_a_receipt_the_remote_refuses_is_fenced_and_the_claim_beside_it_stands(tmp_path: Path) -> None:
    bare, planner, key, (wa, _) = _fleet(tmp_path, 2)

    def lapse_and_recover() -> None:  # r0's lease lapses while wa generates it; the owner recovers it
        time.sleep(1.5)
        res = run_genjob_process("recover", "--remote", "origin", "--json", cwd=planner)
        assert res.code == 0 and json.loads(res.out)["unknown"] == ["r0"], res.out + res.err

    log = _log_pushes(bare)
    # a 1 s lease, no renewal past the 0.3 s --timeout: r0's lease lapses during its generation;
    # no fetch for age, so r0's receipt goes out in r1's claim push
    opts = _worker(_Meanwhile([lapse_and_recover]), planner, key, lease_s=1.0, timeout_s=0.3, refresh_s=600)
    report = work(Store.open(str(wa)), opts)
    pushes = log.read_text().split("\n")[:-1]
    j = "refs/genjob/jobs/"
    assert pushes[0] == f"{j}r0 " and pushes[-2:] == [f"{j}r1 ", f"{j}r1 "], pushes  # r0's receipt: refused
    got = {o.key: o.result for o in report.outcomes}
    assert got == {"r0": "fenced", "r1": "ok"}, report.outcomes  # one push: r0's receipt refused, r1's claim in
    assert report.exit_code == 4
    assert run_genjob("fetch", cwd=planner).code == 0
    shown = json.loads(run_genjob("show", "r0", "--json", cwd=planner).out)
    assert shown["state"] == "unknown" and shown["events"][-1]["event"] != "receipt"  # recover's word stands
    assert json.loads(run_genjob("show", "r1", "--json", cwd=planner).out)["state"] == "done"
    assert run_genjob("verify", "r1", cwd=planner).code == 0


def test_an_interrupted_worker_still_publishes_the_receipt_it_holds(tmp_path: Path) -> None:
    bare, planner, key, (wa, _) = _fleet(tmp_path, 2)

    def progress(line: str) -> None:  # SIGINT/SIGTERM (KeyboardInterrupt) once r1 is claimed, not yet pushed
        if line.startswith("claimed r1"):
            raise KeyboardInterrupt

    try:
        work(Store.open(str(wa)), _worker(_Meanwhile([]), planner, key), progress)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("not interrupted")
    assert run_genjob("fetch", cwd=planner).code == 0
    assert json.loads(run_genjob("show", "r0", "--json", cwd=planner).out)["state"] == "done"
    assert run_genjob("verify", "r0", cwd=planner).code == 0
    assert json.loads(run_genjob("show", "r1", "--json", cwd=planner).out)["state"] == "queued"  # its claim never left


def test_after_a_lost_race_a_worker_fetches_before_each_claim(tmp_path: Path) -> None:
    bare, planner, key, (wa, wb) = _fleet(tmp_path, 4)
    # wb takes r1 while wa generates r0, and the other of r2/r3 while wa generates the one it
    # picked after its lost race (a worker that lost a race picks at random among the oldest)
    gen = _Meanwhile([lambda: _other_worker(wb, planner, key, "r1"), lambda: _other_worker(wb, planner, key, None)])
    report = work(Store.open(str(wa)), _worker(gen, planner, key, refresh_s=600))
    got = [(o.key, o.result) for o in report.outcomes]
    # having lost r1, wa fetched before claiming again: it saw wb's second job taken and never pushed for it
    assert got[:2] == [("r0", "ok"), ("r1", "lost")] and len(got) == 3, got
    assert got[2] in (("r2", "ok"), ("r3", "ok")), got
    assert run_genjob("fetch", cwd=planner).code == 0
    for k in ("r0", "r1", "r2", "r3"):
        assert len(_attempts(planner, k)) == 1, k
        assert json.loads(run_genjob("show", k, "--json", cwd=planner).out)["state"] == "done"
