"""A simulated CI fleet: N runner processes, each `git genjob work --remote origin --max-jobs K`
in its own fresh clone of one bare remote, some cancelled at random points the way a forge
cancels a job (SIGTERM, then SIGKILL after a short grace), then `recover` and the owner's view.

Usage: python bench/fleet.py [--runners 16] [--jobs 200] [--max-jobs 20] [--cancel 0.5] [--seed 1]

It checks what issue 25 asks of a fleet, and prints it (exit 1 when one does not hold):
- 0 double claims: the generator appends its job's instruction to a log outside the sandbox
  (work --sandbox-rw), and no job is generated twice; no job holds two attempts that reached
  `sending` (a job is sent at most once: a lapsed `sending` ends `unknown`, never resent);
- 0 lost jobs: after `recover` and a second round of runners every job is `done` (a receipt),
  or `unknown` (a cancelled attempt after the request went out, held for its owner), and each
  `done` job was generated exactly once;
- every cancelled attempt is recoverable: `recover` ends each lapsed claim, a lapsed `claimed`
  one is requeued and worked by the second round, and `retry` of an `unknown` job finishes it.

tests/worker/test_fleet.py runs a bounded version with a fixed seed; bench/suite.py's `fleet` row uses
`claims_per_second` for claims/s through the remote with 1, 4 and 16 runners.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

GRACE_S = 0.5  # between the forge's SIGTERM and its SIGKILL (GitHub waits longer; this is the worst case)
PATHS = 8  # the jobs' allowed paths: f0.py .. f7.py


@dataclass
class Fleet:
    """The bare remote, the planner's repository, the worker key and the environment every
    process of the fleet runs with (its own HOME: nothing is written to the user's config)."""

    root: str
    bare: str
    planner: str
    key: str
    shared: str
    env: dict[str, str]
    sandbox: list[str]
    instructions: dict[str, str] = field(default_factory=dict)  # key -> instruction

    @property
    def keys(self) -> list[str]:
        return sorted(self.instructions)

    def genjob(self, cwd: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "git_genjob", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def git(self, cwd: str, *args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=cwd, env=self.env, capture_output=True, text=True, check=False)
        if proc.returncode:
            raise RuntimeError(f"git {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def clone(self, name: str) -> str:
        dest = os.path.join(self.root, "clones", name)
        self.git(self.root, "clone", "-q", self.bare, dest)
        return dest

    def work_argv(self, worker: str, max_jobs: int, lease: str) -> list[str]:
        log, release = os.path.join(self.shared, "generated.log"), os.path.join(self.shared, "release")
        # A slow job holds its runner until `release` exists: that runner is always cancelled
        # mid-generation, after its request went out.
        command = (
            f'printf "%s\\n" "$GENJOB_INSTRUCTION" >> {log}; sleep 0.5; '
            f'case "$GENJOB_INSTRUCTION" in *slow*) while [ ! -e {release} ]; do sleep 0.1; done;; esac; '
            'for f in *.py; do printf "# generated\\n" >> "$f"; done'
        )
        return [
            *("work", "--remote", "origin", "--max-jobs", str(max_jobs), "--lease", lease),
            *("--generator", f"exec:{command}", "--signing-key", self.key, "--worker-id", worker),
            *self.sandbox,
            "--json",
        ]

    def slow_sent(self) -> bool:
        """Whether a slow job's generator has started (so cancelling its runner leaves it `sending`)."""
        return any(text.endswith(" slow") for text in self.generated())

    def generated(self) -> Counter[str]:
        try:
            with open(os.path.join(self.shared, "generated.log"), encoding="utf-8") as fh:
                return Counter(line.rstrip("\n") for line in fh if line.strip())
        except FileNotFoundError:
            return Counter()


def make_fleet(root: str, jobs: int, slow: int) -> Fleet:
    """A bare remote holding `main` (with a trust store naming a worker and a planner key) and
    `jobs` signed queued jobs, each allowed one of f0..f7.py; the first `slow` ones (the first
    claimed) block their generator until released."""
    home = os.path.join(root, "home")
    os.makedirs(os.path.join(home, ".config"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GENJOB_")) or k == "GENJOB_SANDBOX"},
        "HOME": home,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "fleet",
        "GIT_AUTHOR_EMAIL": "fleet@example.com",
        "GIT_COMMITTER_NAME": "fleet",
        "GIT_COMMITTER_EMAIL": "fleet@example.com",
        "NO_COLOR": "1",
    }
    with open(os.path.join(home, ".gitconfig"), "w", encoding="utf-8") as fh:
        fh.write('[init]\n\tdefaultBranch = main\n[protocol "file"]\n\tallow = always\n')
    shared = os.path.join(root, "shared")
    os.makedirs(shared)
    os.chmod(shared, 0o777)  # a root worker runs its generator as nobody
    fleet = Fleet(root, os.path.join(root, "remote.git"), os.path.join(root, "planner"), "", shared, env, [])
    fleet.sandbox = ["--sandbox-rw", shared] if _sandbox_usable() else ["--no-sandbox"]
    fleet.git(root, "init", "-q", "--bare", fleet.bare)
    fleet.git(root, "init", "-q", "-b", "main", fleet.planner)
    for i in range(PATHS):
        with open(os.path.join(fleet.planner, f"f{i}.py"), "w", encoding="utf-8") as fh:
            fh.write(f"x = {i}\n")
    fleet.git(fleet.planner, "add", "-A")
    fleet.git(fleet.planner, "commit", "-qm", "initial")
    _check(fleet.genjob(fleet.planner, "init"))  # creates the planner key under this HOME and trusts it
    fleet.key = os.path.join(root, "keys", "fleet")
    _check(fleet.genjob(fleet.planner, "keygen", "--name", "fleet", "--out", fleet.key))
    _check(fleet.genjob(fleet.planner, "trust", "add", "fleet", fleet.key + ".pub"))
    fleet.git(fleet.planner, "add", ".genjob")
    fleet.git(fleet.planner, "commit", "-qm", "trust the fleet's worker key")
    fleet.git(fleet.planner, "remote", "add", "origin", fleet.bare)
    fleet.git(fleet.planner, "push", "-q", "origin", "main")
    fleet.instructions = _submit_all(fleet, jobs, slow)
    _check(fleet.genjob(fleet.planner, "push", "origin"))
    return fleet


def _submit_all(fleet: Fleet, jobs: int, slow: int) -> dict[str, str]:
    """Submit `jobs` jobs in one process (the planner's side is not what is measured)."""
    instructions = {f"fleet-{i:05d}": f"fleet job {i}" + (" slow" if i < slow else "") for i in range(jobs)}
    script = (
        "import json, sys\n"
        "from git_genjob.planner.queue import submit\n"
        "from git_genjob.planner.trust import planner_key\n"
        "from git_genjob.storage.store import Store\n"
        "store = Store.open('.')\n"
        "key = planner_key(store, None)\n"
        "for n, (k, text) in enumerate(json.loads(sys.argv[1]).items()):\n"
        f"    submit(store, text, [f'f{{n % {PATHS}}}.py'], key=k, signing_key=key)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(instructions)],
        cwd=fleet.planner,
        env=fleet.env,
        capture_output=True,
        text=True,
        check=False,
    )
    _check(proc)
    return instructions


def _check(proc: subprocess.CompletedProcess[str]) -> None:
    if proc.returncode:
        raise RuntimeError(f"{' '.join(map(str, proc.args))[:200]} exited {proc.returncode}: {proc.stderr[-2000:]}")


def _sandbox_usable() -> bool:
    from git_genjob.worker.generators.sandbox.choose import bwrap_problem, landlock_problem

    return bwrap_problem() is None or landlock_problem(False) is None


@dataclass
class Round:
    started: int = 0
    cancelled: int = 0
    exits: list[int] = field(default_factory=list)
    seconds: float = 0.0


def run_round(
    fleet: Fleet,
    name: str,
    runners: int,
    max_jobs: int,
    rng: random.Random,
    cancel: float,
    lease: str,
    deadline: float,
) -> Round:
    """`runners` runner processes at once, each in its own fresh clone; a `cancel` share of them
    is cancelled by a forge after a random time (SIGTERM, GRACE_S, SIGKILL), and every one still
    running at `deadline` seconds (the forge's job timeout) is cancelled the same way."""
    clones = [fleet.clone(f"{name}-{i}") for i in range(runners)]
    plan = [rng.uniform(0.5, max(4.0, 0.75 * deadline)) if rng.random() < cancel else None for _ in range(runners)]
    t = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "git_genjob", *fleet.work_argv(f"{name}-{i}", max_jobs, lease)],
            cwd=clone,
            env=fleet.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a forge signals the runner's whole process group
        )
        for i, clone in enumerate(clones)
    ]
    result = Round(started=runners)
    pending = {i for i, when in enumerate(plan) if when is not None}
    while any(p.poll() is None for p in procs):
        now = time.monotonic() - t
        if now >= deadline and (fleet.slow_sent() or now >= 4 * deadline):
            pending |= {i for i, p in enumerate(procs) if p.poll() is None}
            plan = [0.0] * runners
        for i in sorted(pending):
            when = plan[i]
            if when is not None and now >= when:
                pending.discard(i)
                if procs[i].poll() is None:
                    result.cancelled += 1
                    _cancel(procs[i], rng.choice([signal.SIGINT, signal.SIGTERM]))
        time.sleep(0.05)
    for p in procs:
        _, err = p.communicate()
        if "Traceback" in err:
            raise RuntimeError(f"a runner crashed: {err[-3000:]}")
        result.exits.append(p.returncode)
    result.seconds = time.monotonic() - t
    for clone in clones:
        shutil.rmtree(clone, ignore_errors=True)
    return result


def _cancel(proc: subprocess.Popen[str], sig: int) -> None:
    """What a forge does to a cancelled job: SIGINT or SIGTERM to the group, then SIGKILL after a grace."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def ledger(fleet: Fleet, cwd: str) -> dict[str, dict[str, Any]]:
    """Every job of the remote (live or archived) after a fetch: its state and its attempts' states."""
    from git_genjob.storage.records import load_archived, load_live
    from git_genjob.storage.store import Store

    _check(fleet.genjob(cwd, "fetch", "origin"))
    store = Store.open(cwd)
    out = {}
    for key in fleet.keys:
        record = load_live(store, key) or load_archived(store, key)
        if record is not None:
            out[key] = {"state": record.state, "attempts": [a.state for a in record.attempts]}
    return out


def sent_attempts(job: dict[str, Any]) -> int:
    """Attempts of a job that reached `sending` (their request may have gone out)."""
    return sum(1 for state in job["attempts"] if state != "failed_before_send" and state != "claimed")


def check(fleet: Fleet, jobs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The fleet's verdicts: each list empty when the property holds."""
    generated = fleet.generated()
    instruction = fleet.instructions
    states = Counter(j["state"] for j in jobs.values())
    return {
        "states": dict(states),
        "generated_twice": sorted(i for i, n in generated.items() if n > 1),
        "sent_twice": sorted(k for k, j in jobs.items() if sent_attempts(j) > 1),
        "lost": sorted(set(fleet.keys) - set(jobs))
        + sorted(k for k, j in jobs.items() if j["state"] not in ("done", "unknown")),
        # after recover, no attempt of a cancelled runner is left claimed or sending
        "stuck_attempts": sorted(k for k, j in jobs.items() if {"claimed", "sending"} & set(j["attempts"])),
        "done_not_generated": sorted(
            k for k, j in jobs.items() if j["state"] == "done" and generated[instruction[k]] != 1
        ),
    }


def run(
    runners: int,
    jobs: int,
    max_jobs: int,
    cancel: float,
    seed: int,
    root: str,
    lease: str = "2s",
    timeout: float = 20.0,
    slow: int = 1,
) -> dict[str, Any]:
    """The whole acceptance: round 1 with cancellations (and `slow` jobs whose runners are
    cancelled mid-generation at the `timeout`), recover, round 2 without, the owner's retry of
    one `unknown` job; returns what was seen (see `check`)."""
    rng = random.Random(seed)
    fleet = make_fleet(root, jobs, slow)
    first = run_round(fleet, "r1", runners, max_jobs, rng, cancel, lease, timeout)
    time.sleep(float(lease.rstrip("s")) + 0.5)  # every lease the cancelled runners held has lapsed
    sweeper = fleet.clone("sweeper")
    recovered = fleet.genjob(sweeper, "recover", "--remote", "origin", "--json")
    _check(recovered)
    open(os.path.join(fleet.shared, "release"), "w").close()  # a slow job recover requeued finishes now
    bound = max(60.0, 4 * timeout)  # later rounds cancel nothing, unless one hangs: then the forge would
    second = run_round(fleet, "r2", runners, max_jobs, rng, 0.0, lease, bound)
    seen = ledger(fleet, sweeper)
    verdict = check(fleet, seen)
    retried = None
    unknown = sorted(k for k, j in seen.items() if j["state"] == "unknown")
    if unknown:  # the owner's decision: a new attempt of the same job, which a runner finishes
        _check(fleet.genjob(sweeper, "retry", unknown[0]))
        _check(fleet.genjob(sweeper, "push", "origin"))
        third = run_round(fleet, "r3", 1, 1, rng, 0.0, lease, bound)
        retried = {"key": unknown[0], "state": ledger(fleet, sweeper)[unknown[0]]["state"], "exits": third.exits}
    return {
        "runners": runners,
        "jobs": jobs,
        "max_jobs": max_jobs,
        "seed": seed,
        "sandbox": "none" if "--no-sandbox" in fleet.sandbox else "auto",
        "round1": first.__dict__,
        "recover": json.loads(recovered.stdout or "null"),
        "round2": second.__dict__,
        "retried": retried,
        **verdict,
    }


FAST = 'for f in *.py; do printf "# generated\\n" >> "$f"; done'  # a job's whole generator: no model, no wait


def run_sharded(
    root: str, runners: int, jobs: int, sharded: bool = True, trace: bool = False, remote_config: tuple[str, ...] = ()
) -> dict[str, Any]:
    """`runners` processes of `work --remote origin [--shard I/N] --json`, each in its own fresh
    clone of one bare remote holding `jobs` queued jobs, all started at once and run until the
    queue is empty (SPEC §12.3). What it returns: each job's state, attempts and receipt status
    as the remote holds them, the races lost (from the runners' --json), claims/s, the bytes each
    claim added to the object stores, and with `trace` the git processes each claim cost
    (GIT_TRACE2_EVENT logs of every runner). `remote_config`: KEY=VALUE set on the bare remote."""
    from git_genjob.planner.rows import receipt_result
    from git_genjob.storage.records import load_live
    from git_genjob.storage.store import Store

    fleet = make_fleet(root, jobs, 0)
    for item in remote_config:
        fleet.git(fleet.bare, "config", *item.split("=", 1))
    clones = [fleet.clone(f"s{i}") for i in range(runners)]
    traces = os.path.join(root, "trace")
    os.makedirs(traces, exist_ok=True)
    procs = []
    remote_before, clones_before = store_bytes(fleet.bare), store_bytes(*clones)
    t = time.monotonic()
    for i, clone in enumerate(clones):
        argv = [sys.executable, "-m", "git_genjob", "work", "--remote", "origin", "--generator", f"exec:{FAST}"]
        argv += ["--signing-key", fleet.key, "--worker-id", f"s{i}", *fleet.sandbox, "--json"]
        argv += ["--shard", f"{i}/{runners}"] if sharded else []
        env = dict(fleet.env)
        if trace:
            env["GIT_TRACE2_EVENT"] = os.path.join(traces, f"s{i}.json")
        procs.append(
            subprocess.Popen(argv, cwd=clone, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        )  # fmt: skip
    outs = [p.communicate(timeout=600) for p in procs]
    seconds = time.monotonic() - t
    exits = [p.returncode for p in procs]
    pushed, fetched = store_bytes(fleet.bare) - remote_before, store_bytes(*clones) - clones_before
    reports = []
    for out, err in outs:
        if "Traceback" in err or not out.strip():
            raise RuntimeError(f"a runner failed: {err[-3000:]}")
        reports.append(json.loads(out))
    results = Counter(o["result"] for r in reports for o in r["jobs"])
    sweeper = fleet.clone("sweeper")
    _check(fleet.genjob(sweeper, "fetch", "origin"))
    store = Store.open(sweeper)
    seen: dict[str, dict[str, Any]] = {}
    for key in fleet.keys:
        record = load_live(store, key)
        seen[key] = (
            {"state": None}
            if record is None
            else {"state": record.state, "attempts": len(record.attempts), "receipt": receipt_result(record)}
        )
    claims = sum(n for result, n in results.items() if result != "lost")
    out: dict[str, Any] = {
        "runners": runners,
        "jobs": jobs,
        "sharded": sharded,
        "exits": exits,
        "seconds": round(seconds, 2),
        "claims": claims,
        "claims_per_s": claims / seconds,
        "lost": results.get("lost", 0),
        "lost_per_claim": results.get("lost", 0) / max(1, claims),
        "results": dict(results),
        "lost_keys": [(i, o["key"]) for i, r in enumerate(reports) for o in r["jobs"] if o["result"] == "lost"],
        "jobs_seen": seen,
    }
    out["remote_bytes_per_claim"] = pushed / max(1, claims)  # the remote's object store growth
    out["runner_bytes_per_claim"] = fetched / max(1, claims)  # the runners' (their claims, receipts, fetches)
    if trace:
        out.update(git_cost(traces, claims))
    return out


def git_cost(traces: str, claims: int) -> dict[str, Any]:
    """Git processes each claim cost: every `git` the runners started, on both sides of the
    file:// transport (receive-pack, upload-pack and what they start run with the runner's
    environment), counted from their GIT_TRACE2_EVENT logs, one `start` event per process."""
    processes, verbs = 0, Counter()
    for name in os.listdir(traces):
        with open(os.path.join(traces, name), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev.get("event") == "start":
                    processes += 1
                    verbs[_verb(ev.get("argv", []))] += 1
    n = max(1, claims)
    return {"git_processes_per_claim": processes / n, "git_per_claim": {v: c / n for v, c in verbs.most_common()}}


def _verb(argv: list[str]) -> str:
    """`push` of `git --git-dir=X -c a=b push …`, `receive-pack` of `git-receive-pack DIR`."""
    if argv and os.path.basename(argv[0]).startswith("git-"):
        return os.path.basename(argv[0])[4:]
    rest = iter(argv[1:])
    for a in rest:
        if a == "-c":
            next(rest, None)
        elif not a.startswith("-"):
            return a
    return "?"


def store_bytes(*repos: str) -> int:
    """Bytes of the object stores of `repos` (a bare remote or clones): their growth over a run is
    what its pushes carried to the remote and its fetches carried to the runners, as stored."""
    total = 0
    for repo in repos:
        objects = os.path.join(repo, "objects") if repo.endswith(".git") else os.path.join(repo, ".git", "objects")
        for dirpath, _, files in os.walk(objects):
            total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    return total


def holds(result: dict[str, Any]) -> bool:
    retried = result["retried"]
    return (
        not result["generated_twice"]
        and not result["sent_twice"]
        and not result["lost"]
        and not result["done_not_generated"]
        and not result["stuck_attempts"]
        and (retried is None or retried["state"] == "done")
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runners", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--max-jobs", type=int, default=20)
    ap.add_argument("--cancel", type=float, default=0.5, help="share of round-1 runners a forge cancels")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lease", default="2s")
    ap.add_argument(
        "--timeout", type=float, default=60.0, help="round 1's job timeout: runners still going are cancelled"
    )
    ap.add_argument("--slow", type=int, default=1, help="jobs whose generator blocks until cancelled")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="genjob-fleet-")
    try:
        result = run(
            args.runners, args.jobs, args.max_jobs, args.cancel, args.seed, root, args.lease, args.timeout, args.slow
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0 if holds(result) else 1


if __name__ == "__main__":
    sys.exit(main())
