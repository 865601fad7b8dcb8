"""bench/run: every figure of docs/performance.md in one bounded run, beside its baseline.

Usage: bench/run [--quick] [--out bench/results.json]

Each row states its target, what was measured, the baseline measured in the same run and the
ratio. Scale rows are built with bench/fixture.py (git fast-import) and then measured through
git-genjob's normal code path. No figure here is asserted anywhere: this is a measurement.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from baseline.plainqueue import PlainQueue  # noqa: E402
from common import make_repo, trusted_key  # noqa: E402

MiB = 1024 * 1024


@dataclass
class Row:
    name: str
    target: str
    measured: str
    baseline: str = ""
    ratio: float | None = None
    ok: bool | None = None
    data: dict[str, Any] = field(default_factory=dict)


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def growth(sizes: list[int], values: list[float]) -> tuple[float, str]:
    """The exponent b of value ~ size^b (least squares on logs) and its name."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(v, 1e-9)) for v in values]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    name = "constant" if b < 0.1 else "sublinear (log-like)" if b < 0.5 else "linear" if b < 1.3 else "superlinear"
    return b, name


# -- an in-process generator ------------------------------------------------------------------
class PyGen:
    """A generator that writes bytes into the scratch tree from Python (no process start-up)."""

    kind = "exec"
    endpoint = None
    model = None
    command = "bench"

    def __init__(self, make: Callable[[str, bytes | None], bytes]):
        self.make = make

    def describe(self) -> dict[str, str | None]:
        return {"kind": self.kind, "endpoint": None, "model": None, "command": self.command}

    def generate(self, ctx: Any) -> Any:
        from git_genjob.worker.generators.base import GenResult

        for path in ctx.job.allowed_paths:
            target = os.path.join(ctx.scratch, path)
            with open(target, "wb") as fh:
                fh.write(self.make(path, ctx.inputs.get(path)))
        return GenResult("ok")


def append_line(path: str, old: bytes | None) -> bytes:
    return (old or b"") + b"# edited\n"


def worker_opts(keypath: str, gen: Any, worker_id: str = "bench") -> Any:
    from git_genjob.documents.keys import read_signing_key
    from git_genjob.worker.run import WorkerOptions

    return WorkerOptions(gen, read_signing_key(keypath), worker_id, lease_s=600)


def genjob_one(store: Any, opts: Any, i: int, path: str) -> dict[str, float]:
    """submit -> claim -> generate+sign+store -> verify -> apply, timed per step."""
    from git_genjob.landing.apply import apply
    from git_genjob.landing.verify import verify
    from git_genjob.planner.ledger import claim
    from git_genjob.planner.queue import submit
    from git_genjob.storage.publish import publisher
    from git_genjob.storage.records import load_live
    from git_genjob.worker.run import run_claimed

    t0 = time.perf_counter()
    res = submit(store, f"round trip {i}", [path], key=f"rt-{i}-{os.getpid()}")
    t1 = time.perf_counter()
    pub = publisher(store)
    record = load_live(store, res.key)
    assert record is not None
    lease = claim(pub, record, opts.worker_id, opts.lease_s)
    t2 = time.perf_counter()
    outcome = run_claimed(pub, lease, opts, lambda _: None)
    assert outcome.result == "ok", outcome
    t3 = time.perf_counter()
    verdict = verify(store, res.key)
    assert verdict.ok, verdict.failures()
    t4 = time.perf_counter()
    apply(store, res.key)
    t5 = time.perf_counter()
    return {"submit": t1 - t0, "claim": t2 - t1, "sign": t3 - t2, "verify": t4 - t3, "apply": t5 - t4, "total": t5 - t0}


def baseline_one(q: PlainQueue, i: int, path: str) -> dict[str, float]:
    t0 = time.perf_counter()
    key = q.submit(f"rt-{i}", f"round trip {i}", [path])
    t1 = time.perf_counter()
    job = q.claim_next()
    assert job is not None and job["key"] == key
    t2 = time.perf_counter()
    with open(os.path.join(q.worktree, path), "rb") as fh:
        q.receipt(job, {path: append_line(path, fh.read())})
    t3 = time.perf_counter()
    assert q.verify(key)
    t4 = time.perf_counter()
    q.apply(key)
    t5 = time.perf_counter()
    return {"submit": t1 - t0, "claim": t2 - t1, "sign": t3 - t2, "verify": t4 - t3, "apply": t5 - t4, "total": t5 - t0}


def row_round_trip(n: int) -> list[Row]:
    from git_genjob.storage.store import Store

    repo = make_repo()
    keypath = trusted_key(repo)
    store = Store.open(repo)
    opts = worker_opts(keypath, PyGen(append_line))
    plain_wt = tempfile.mkdtemp(prefix="genjob-bench-plain-")
    for i in range(20):
        shutil.copy(os.path.join(repo, f"f{i}.py"), plain_wt)
    durable = PlainQueue(os.path.join(plain_wt, ".queue"), plain_wt, durable=True)
    loose = PlainQueue(os.path.join(plain_wt, ".queue-nofsync"), plain_wt, durable=False)
    g, b, bl = [], [], []
    for i in range(n):  # interleaved, so that noise hits both alike
        g.append(genjob_one(store, opts, i, f"f{i % 20}.py"))
        b.append(baseline_one(durable, i, f"f{i % 20}.py"))
        bl.append(baseline_one(loose, 100000 + i, f"f{i % 20}.py"))
    steps = ["submit", "claim", "sign", "verify", "apply", "total"]
    gm = {s: median_ms([x[s] for x in g]) for s in steps}
    bm = {s: median_ms([x[s] for x in b]) for s in steps}
    blm = {s: median_ms([x[s] for x in bl]) for s in steps}
    ratio = gm["total"] / bm["total"]
    rows = [
        Row(
            "in-process round trip submit→claim→sign→verify→apply",
            "≤ 3x baseline",
            f"{gm['total']:.1f} ms",
            f"{bm['total']:.1f} ms (fsynced plain files; {blm['total']:.2f} ms without fsync)",
            ratio,
            ratio <= 3,
            {"genjob_ms": gm, "baseline_fsync_ms": bm, "baseline_nofsync_ms": blm, "jobs": n},
        )
    ]
    for s in steps[:-1]:
        rows.append(Row(f"  step: {s}", "—", f"{gm[s]:.2f} ms", f"{bm[s]:.2f} ms", gm[s] / bm[s] if bm[s] else None))
    shutil.rmtree(plain_wt, ignore_errors=True)
    return rows


FSYNC_CHILD = """
import os, shutil, sys, tempfile
sys.path.insert(0, sys.argv[1])
import suite
from suite import PlainQueue
from git_genjob.storage.store import Store
n, marks = int(sys.argv[2]), sys.argv[3]
repo = suite.make_repo(); store = Store.open(repo)
opts = suite.worker_opts(suite.trusted_key(repo), suite.PyGen(suite.append_line))
plain = tempfile.mkdtemp(prefix="genjob-bench-plain-")
for i in range(20):
    shutil.copy(os.path.join(repo, f"f{i}.py"), plain)
q = PlainQueue(os.path.join(plain, ".queue"), plain, durable=True)
for i in range(3):  # warm-up: first writes make directories, first reads fill caches
    suite.genjob_one(store, opts, i, f"f{i % 20}.py"); suite.baseline_one(q, i, f"f{i % 20}.py")
os.close(os.open(marks + ".genjob", os.O_CREAT | os.O_WRONLY, 0o600))
for i in range(3, 3 + n):
    suite.genjob_one(store, opts, i, f"f{i % 20}.py")
os.close(os.open(marks + ".plain", os.O_CREAT | os.O_WRONLY, 0o600))
for i in range(3, 3 + n):
    suite.baseline_one(q, i, f"f{i % 20}.py")
os.close(os.open(marks + ".end", os.O_CREAT | os.O_WRONLY, 0o600))
shutil.rmtree(repo, ignore_errors=True); shutil.rmtree(plain, ignore_errors=True)
"""


def row_fsyncs(n: int) -> list[Row]:
    """fsync-family system calls per round trip, counted with strace (counts do not move with
    load), against the fsynced plain-file baseline doing the same jobs in the same process."""
    strace = shutil.which("strace")
    name = "round trip, fsync calls per job (fsync, fdatasync, syncfs)"
    if strace is None:
        return [Row(name, "≤ 25", "not counted (no strace on PATH)", "—", None, None)]
    work = tempfile.mkdtemp(prefix="genjob-bench-fsync-")
    log, marks = os.path.join(work, "strace.txt"), os.path.join(work, "mark")
    proc = subprocess.run(
        [strace, "-f", "-qq", "-e", "trace=fsync,fdatasync,syncfs,openat", "-o", log,
         sys.executable, "-c", FSYNC_CHILD, HERE, str(n), marks],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    if proc.returncode != 0 or not os.path.exists(marks + ".end"):  # no ptrace here (a container), or the trips failed
        shutil.rmtree(work, ignore_errors=True)
        why = (proc.stderr.strip().splitlines() or ["no output"])[-1][:120]
        return [Row(name, "≤ 25", f"not counted (strace exited {proc.returncode}: {why})", "—", None, None)]
    phase, counts = "", {"genjob": {}, "plain": {}}  # type: ignore[var-annotated]
    with open(log, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            call = line.split(None, 1)[1] if " " in line else ""
            if call.startswith("openat(") and marks in call:
                phase = call.split(marks, 1)[1].split('"', 1)[0].lstrip(".")
            elif phase in counts and "resumed" not in call:
                fn = call.split("(", 1)[0]
                if fn in ("fsync", "fdatasync", "syncfs"):
                    counts[phase][fn] = counts[phase].get(fn, 0) + 1
    shutil.rmtree(work, ignore_errors=True)
    g, b = sum(counts["genjob"].values()) / n, sum(counts["plain"].values()) / n
    detail = ", ".join(f"{v / n:g} {k}" for k, v in sorted(counts["genjob"].items()))
    return [
        Row(name, "≤ 25", f"{g:g} ({detail})", f"{b:g} (fsynced plain files)", g / b if b else None, g <= 25,
            {"jobs": n, "genjob": counts["genjob"], "plain": counts["plain"]})
    ]  # fmt: skip


# -- scale ------------------------------------------------------------------------------------
def scale_repo(archived: int, queued: int) -> tuple[str, str]:
    import fixture

    repo = make_repo()
    keypath = trusted_key(repo)  # first: the fixture's queued jobs are signed by its planner key
    fixture.build(repo, archived, queued)
    subprocess.run(["git", "-C", repo, "reset", "-q", "--hard"], check=True)
    return repo, keypath


HWM = (
    "import atexit, runpy, sys\n"
    "def hwm():\n"
    "    with open('/proc/self/status') as fh:\n"
    "        kb = [l.split()[1] for l in fh if l.startswith('VmHWM:')][0]\n"
    "    sys.stderr.write('\\nbench-hwm-kb %s\\n' % kb)\n"
    "atexit.register(hwm)\n"
    "sys.argv = ['git-genjob'] + sys.argv[1:]\n"
    "runpy.run_module('git_genjob', run_name='__main__')\n"
)


def child_run(argv: list[str], cwd: str) -> tuple[float, float, int]:
    """(seconds, peak RSS in MiB, exit code) of one `git genjob ARGV` child process.

    The peak is the child's own VmHWM, read at its exit: ru_maxrss of a child would carry the
    high-water mark of this (large) parent across fork and exec, which is not the child's.
    """
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", HWM, *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    elapsed = time.perf_counter() - t
    marks = [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("bench-hwm-kb ")]
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-2000:])
    return elapsed, (int(marks[-1]) / 1024 if marks else float("nan")), proc.returncode


def row_scale(sizes: list[int], live: int, jobs: int) -> list[Row]:
    from git_genjob.landing.auditrange import audit
    from git_genjob.storage.publish import publisher
    from git_genjob.storage.store import Store
    from git_genjob.worker.run import Picker, WorkReport, _claim_next

    apply_ms, audit_ms, claim_ms, status_s, first_s, status_mb = [], [], [], [], [], []
    for n in sizes:
        repo, keypath = scale_repo(n, live)
        store = Store.open(repo)
        opts = worker_opts(keypath, PyGen(append_line))
        applies = [genjob_one(store, opts, i, f"f{i % 20}.py")["apply"] for i in range(jobs)]
        apply_ms.append(median_ms(applies))
        t = time.perf_counter()
        results = audit(Store.open(repo), f"HEAD~{jobs}..HEAD")
        audit_ms.append((time.perf_counter() - t) * 1000 / jobs)
        bad = [r for r in results if r.problems]
        assert not bad, bad[0].problems
        claims = []
        pub = publisher(store)
        picker = Picker(store)
        for _ in range(min(15, live)):
            t = time.perf_counter()
            lease = _claim_next(pub, opts, WorkReport(), lambda _: None, picker)
            claims.append(time.perf_counter() - t)
            assert lease is not None
        claim_ms.append(median_ms(claims))
        # The first run after the applies and claims above reads what changed (its caches are
        # cold, as after a fetch); the next three are the everyday `status --all`.
        runs = [child_run(["status", "--all", "--json"], repo) for _ in range(4)]
        assert all(rc == 0 for _, _, rc in runs)
        first_s.append(runs[0][0])
        status_s.append(statistics.median(el for el, _, _ in runs[1:]))
        status_mb.append(max(rss for _, rss, _ in runs))
        print(
            f"  scale {n:>7,} archived: apply {apply_ms[-1]:.1f} ms, audit {audit_ms[-1]:.2f} ms/commit, "
            f"claim-next {claim_ms[-1]:.1f} ms, status --all {status_s[-1]:.2f} s "
            f"(first {first_s[-1]:.2f} s) / {status_mb[-1]:.0f} MiB",
            file=sys.stderr,
        )
        shutil.rmtree(repo, ignore_errors=True)
    label = " / ".join(f"{s // 1000}k" for s in sizes)

    def g(values: list[float]) -> str:
        b, name = growth(sizes, values)
        return f"{name} (∝ N^{b:.2f})"

    def flat(name: str, target: str, values: list[float], unit: str, field: str, **extra: Any) -> Row:
        return Row(
            name,
            target,
            " / ".join(f"{v:.2f}" for v in values) + f" {unit}",
            f"{values[0]:.2f} {unit} at {sizes[0]:,}",
            values[-1] / values[0],
            growth(sizes, values)[0] < 0.1,
            {"sizes": sizes, field: values, "growth": g(values), **extra},
        )

    return [
        flat(f"apply at {label} archived", "flat", apply_ms, "ms", "ms"),
        flat(
            f"audit per commit at {label} archived",
            "flat in archive size",
            audit_ms,
            "ms/commit",
            "ms_per_commit",
            commits=jobs,
        ),
        Row(
            f"`status --all` at {label} archived + {live:,} live",
            "< 1 s and < 200 MiB at 100k",
            " / ".join(f"{v:.2f}" for v in status_s)
            + " s (first run after a change: "
            + " / ".join(f"{v:.2f}" for v in first_s)
            + " s); "
            + " / ".join(f"{v:.0f}" for v in status_mb)
            + " MiB",
            "",
            None,
            status_s[-1] < 1 and status_mb[-1] < 200 if sizes[-1] >= 100000 else None,
            {
                "sizes": sizes,
                "seconds": status_s,
                "first_seconds": first_s,
                "rss_mib": status_mb,
                "growth": g(status_s),
            },
        ),
        Row(
            f"claim-next with {live:,} queued, {label} archived",
            "≤ 50 ms, flat",
            " / ".join(f"{v:.1f}" for v in claim_ms) + " ms",
            "",
            None,
            max(claim_ms) <= 50,
            {"sizes": sizes, "ms": claim_ms},
        ),
    ]


def row_claim_next_queued(queued: list[int]) -> list[Row]:
    """A worker's pick: cold (its first, one scan of the live refs) and warm (later picks of a loop)."""
    from git_genjob.storage.publish import publisher
    from git_genjob.storage.store import Store
    from git_genjob.worker.run import Picker, WorkReport, _claim_next

    cold, warm, refs_ms = [], [], []
    for q in queued:
        repo, keypath = scale_repo(0, q)
        store = Store.open(repo)
        opts = worker_opts(keypath, PyGen(append_line))
        pub = publisher(store)
        c, w, r = [], [], []
        picker = Picker(store)
        for _ in range(15):
            t = time.perf_counter()
            assert _claim_next(pub, opts, WorkReport(), lambda _: None) is not None
            c.append(time.perf_counter() - t)
            t = time.perf_counter()
            assert _claim_next(pub, opts, WorkReport(), lambda _: None, picker) is not None
            w.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run(
                ["git", "-C", repo, "for-each-ref", "refs/genjob/jobs/"], check=True, stdout=subprocess.DEVNULL
            )
            r.append(time.perf_counter() - t)
        cold.append(median_ms(c))
        warm.append(median_ms(w))
        refs_ms.append(median_ms(r))
        shutil.rmtree(repo, ignore_errors=True)
    label = " / ".join(f"{q:,}" for q in queued)
    bc, nc = growth(queued, cold)
    bw, nw = growth(queued, warm)
    return [
        Row(
            f"claim-next in a worker loop, {label} queued",
            "≤ 50 ms, flat in queued N",
            " / ".join(f"{v:.1f}" for v in warm) + f" ms ({nw}, ∝ N^{bw:.2f})",
            "",
            warm[-1] / warm[0],
            max(warm) <= 50 and bw < 0.1,
            {"queued": queued, "ms": warm},
        ),
        Row(
            f"claim-next, first pick of a process, {label} queued",
            "≤ 50 ms at 1,000",
            " / ".join(f"{v:.1f}" for v in cold) + f" ms ({nc}, ∝ N^{bc:.2f})",
            " / ".join(f"{v:.1f}" for v in refs_ms) + " ms (`git for-each-ref`, a process)",
            None,
            cold[queued.index(1000)] <= 50 if 1000 in queued else None,
            {"queued": queued, "ms": cold, "for_each_ref_ms": refs_ms},
        ),
    ]


CLAIMER = """
import sys, time
from git_genjob.storage.publish import publisher
from git_genjob.storage.store import Store
from git_genjob.worker.run import Picker, WorkReport, WorkerOptions, _claim_next
from git_genjob.documents.keys import generate
repo, wid, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = Store.open(repo)
opts = WorkerOptions(None, generate("c"), wid, lease_s=600)
pub = publisher(store)
picker = Picker(store)
n = lost = 0
print("ready", flush=True)
sys.stdin.readline()
end = time.monotonic() + seconds
while time.monotonic() < end:
    report = WorkReport()
    if _claim_next(pub, opts, report, lambda _: None, picker) is None:
        break
    n += 1
    lost += sum(1 for o in report.outcomes if o.result == "lost")
print(n, lost)
"""


def _race(argvs: list[list[str]]) -> tuple[list[list[str]], float]:
    """Start one claimer per argv, wait until each has imported and opened its repository
    (it prints "ready"), start them all at once ("go"), and return each one's output words
    and the seconds until the last one finished."""
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for argv in argvs]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    t = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate()[0].split() for p in procs]
    return outs, time.perf_counter() - t


def row_claims_per_second(workers: list[int], queued: int, seconds: float) -> Row:
    from git_genjob.planner.live import live_jobs
    from git_genjob.storage.store import Store

    rates, doubles, losses = [], [], []
    for w in workers:
        repo, _ = scale_repo(0, queued)
        outs, elapsed = _race([[sys.executable, "-c", CLAIMER, repo, f"w{i}", str(seconds)] for i in range(w)])
        claimed = sum(int(o[0]) for o in outs)
        losses.append(sum(int(o[1]) for o in outs))
        rates.append(claimed / elapsed)
        records = live_jobs(Store.open(repo))
        doubles.append(sum(1 for r in records if len(r.attempts) > 1))
        assert sum(1 for r in records if r.state == "claimed") == claimed
        shutil.rmtree(repo, ignore_errors=True)
    four = rates[workers.index(4)] if 4 in workers else rates[-1]
    return Row(
        f"claims/s with {' / '.join(map(str, workers))} workers",
        "≥ 200/s at 4, 0 double claims",
        " / ".join(f"{r:.0f}" for r in rates)
        + f"/s; double claims {sum(doubles)}; lost races "
        + " / ".join(map(str, losses)),
        f"{rates[0]:.0f}/s with 1 worker",
        four / rates[0],
        four >= 200 and sum(doubles) == 0,
        {"workers": workers, "claims_per_s": rates, "double_claims": doubles, "lost_races": losses},
    )


REMOTE_CLAIMER = """
import sys, time
from git_genjob.storage.publish import publisher
from git_genjob.storage.store import Store
from git_genjob.worker.run import CONTENDED, Picker, WorkReport, WorkerOptions, _claim_next
from git_genjob.planner.ledger import record_sending
from git_genjob.documents.errors import Conflict
from git_genjob.documents.keys import generate
clone, wid, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = Store.open(clone)
opts = WorkerOptions(None, generate("c"), wid, lease_s=600, remote="origin")
pub = publisher(store, "origin")
picker = Picker(store)
n = lost = 0
print("ready", flush=True)
sys.stdin.readline()
end = time.monotonic() + seconds
fetched_at = contended_until = float("-inf")
while time.monotonic() < end:
    now = time.monotonic()
    fresh = now - fetched_at > opts.refresh_s or now < contended_until
    if fresh:  # as work does: fetch when the view is old, lately after a lost race, when empty
        pub.refresh()
        fetched_at = time.monotonic()
    report = WorkReport()
    lease = _claim_next(pub, opts, report, lambda _: None, picker)
    if lease is None:
        if not fresh:
            fetched_at = float("-inf")
            continue
        break
    lost += sum(1 for o in report.outcomes if o.result == "lost")
    try:  # as work does: the claim goes out with its `sending`, in one leased push
        record_sending(pub, lease)
        n += 1
    except Conflict:
        lost += 1
        picker.lost = True
        fetched_at = float("-inf")
        contended_until = time.monotonic() + CONTENDED * opts.refresh_s
print(n, lost)
"""


def row_fleet_claims(runners: list[int], queued: int, seconds: float, repeats: int) -> Row:
    """Claims/s through one bare remote: each runner a process in its own fresh clone, claiming
    as `work --remote origin` does (fetch when its view is old or lately after a lost race, pick,
    leased push), with no generator behind it; the median of `repeats` runs per runner count."""
    rates, doubles, losses = [], [], []
    for n in runners:
        runs = [_fleet_claims_once(n, queued, seconds) for _ in range(repeats)]
        rates.append(statistics.median(r[0] for r in runs))
        doubles.append(sum(r[1] for r in runs))
        losses.append(statistics.median(r[2] for r in runs))
    return Row(
        f"claims/s through a bare remote with {' / '.join(map(str, runners))} runners (fresh clones, "
        f"median of {repeats})",
        "0 double claims; more runners, not fewer claims/s",
        " / ".join(f"{r:.1f}" for r in rates)
        + f"/s; double claims {sum(doubles)}; lost races "
        + " / ".join(f"{x:g}" for x in losses),
        f"{rates[0]:.1f}/s with 1 runner",
        rates[-1] / rates[0] if rates[0] else None,
        sum(doubles) == 0 and rates[-1] >= rates[0],
        {"runners": runners, "queued": queued, "claims_per_s": rates, "double_claims": doubles, "lost_races": losses},
    )


def row_fleet_sharded(runners: list[int], jobs: int) -> Row:
    """A sharded fleet as it runs (SPEC §12.3): `runners` real `git genjob work --remote origin
    --shard I/N --json` processes, each in its own fresh clone of one bare remote (as a user makes
    it: receive.autogc on), an exec generator that appends a line, until `jobs` queued jobs are
    done (bench/fleet.py run_sharded). Per runner count: claims/s, lost races per claim (from the
    runners' --json), git processes per claim (both sides of file://, GIT_TRACE2_EVENT) and the
    bytes each claim added to the remote's object store."""
    import fleet

    runs = []
    for n in runners:
        root = tempfile.mkdtemp(prefix="genjob-shard-")
        try:
            r = fleet.run_sharded(root, n, jobs, trace=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        once = all(j == {"state": "done", "attempts": 1, "receipt": "ok"} for j in r.pop("jobs_seen").values())
        r.pop("lost_keys")
        runs.append({**r, "each_job_once": once})
    lost = [r["lost_per_claim"] for r in runs]
    return Row(
        f"sharded fleet, `work --shard I/N` with {' / '.join(map(str, runners))} runners on one bare remote "
        f"({jobs} jobs, fresh clones)",
        "each job once; ≤ 0.1 lost races per claim at 8 and 16 (issue 34)",
        " / ".join(f"{r['claims_per_s']:.1f}" for r in runs)
        + "/s; lost per claim "
        + " / ".join(f"{x:.3f}" for x in lost)
        + "; git processes per claim "
        + " / ".join(f"{r['git_processes_per_claim']:.1f}" for r in runs)
        + "; remote bytes per claim "
        + " / ".join(f"{r['remote_bytes_per_claim']:.0f}" for r in runs),
        f"{runs[0]['claims_per_s']:.1f}/s with {runners[0]} runner",
        runs[-1]["claims_per_s"] / runs[0]["claims_per_s"] if runs[0]["claims_per_s"] else None,
        all(r["each_job_once"] for r in runs) and all(r["lost_per_claim"] <= 0.1 for r in runs if r["runners"] >= 8),
        {"runners": runners, "jobs": jobs, "runs": runs},
    )


def _shared_remote(repo: str, n: int) -> tuple[str, list[str]]:
    """A bare remote holding `repo`'s main and genjob refs, and `n` fresh clones of it (a worker
    fetches refs/genjob/* itself)."""
    bare = repo + ".git"
    subprocess.run(["git", "init", "-q", "--bare", bare], check=True)
    subprocess.run(["git", "-C", repo, "push", "-q", bare, "main", "refs/genjob/*:refs/genjob/*"], check=True)
    clones = [f"{repo}-c{i}" for i in range(n)]
    for c in clones:
        subprocess.run(["git", "clone", "-q", "-b", "main", bare, c], check=True)
    return bare, clones


def _fleet_claims_once(n: int, queued: int, seconds: float) -> tuple[float, int, int]:
    """(claims/s, jobs claimed twice, lost races) of `n` runners in fresh clones of one bare remote."""
    from git_genjob.planner.live import live_jobs
    from git_genjob.storage.store import Store

    repo, _ = scale_repo(0, queued)
    bare, clones = _shared_remote(repo, n)
    outs, elapsed = _race(
        [[sys.executable, "-c", REMOTE_CLAIMER, c, f"r{i}", str(seconds)] for i, c in enumerate(clones)]
    )
    claimed = sum(int(o[0]) for o in outs)
    subprocess.run(["git", "-C", repo, "fetch", "-q", bare, "+refs/genjob/*:refs/genjob/*"], check=True)
    records = live_jobs(Store.open(repo))
    assert sum(1 for r in records if r.state == "sending") == claimed  # every claim a runner counted is on the remote
    for path in [repo, bare, *clones]:
        shutil.rmtree(path, ignore_errors=True)
    return claimed / elapsed, sum(1 for r in records if len(r.attempts) > 1), sum(int(o[1]) for o in outs)


def row_remote_workers(workers: list[int], jobs: int) -> list[Row]:
    """Jobs/s of `git genjob work --remote origin` processes, each in its own fresh clone of one
    bare remote, over file:// and over git:// (`git daemon` on 127.0.0.1, receive-pack on),
    running every job of the queue end to end (claim with its `sending` in one push, an
    exec:true generator in the sandbox, the signed receipt pushed with the next claim)."""
    rows = []
    for transport, target in (("file://", "≥ 10 / ≥ 25 (issue 24)"), ("git://", "≥ 5 / ≥ 15 (issue 24)")):
        rates = [_remote_workers_once(n, jobs, transport == "git://") for n in workers]
        rows.append(
            Row(
                f"remote workers, jobs/s over {transport} with {' / '.join(map(str, workers))} workers ({jobs} jobs)",
                target,
                " / ".join(f"{r:.1f}" for r in rates) + " jobs/s",
                "—",
                None,
                None,
                {"workers": workers, "jobs": jobs, "jobs_per_s": rates, "transport": transport},
            )
        )
    return rows


def _git_daemon(base: str) -> tuple[subprocess.Popen[bytes], int]:
    """`git daemon` serving every repository under `base` on 127.0.0.1, pushes allowed."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    daemon = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}", f"--base-path={base}",
         "--export-all", "--enable=receive-pack", base],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return daemon, port
        except OSError:
            if time.monotonic() > deadline:
                daemon.kill()
                raise
            time.sleep(0.05)


def _remote_workers_once(n: int, jobs: int, daemon: bool = False) -> float:
    repo, keypath = scale_repo(0, jobs)
    bare, clones = _shared_remote(repo, n)
    server = None
    if daemon:
        server, port = _git_daemon(os.path.dirname(bare))
        for c in clones:
            url = f"git://127.0.0.1:{port}/{os.path.basename(bare)}"
            subprocess.run(["git", "-C", c, "remote", "set-url", "origin", url], check=True)
    argv = ["work", "--remote", "origin", "--generator", "exec:true", "--signing-key", keypath, "--json"]
    try:
        t = time.perf_counter()
        procs = [
            subprocess.Popen([sys.executable, "-m", "git_genjob", *argv, "--worker-id", f"w{i}"], cwd=c,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for i, c in enumerate(clones)
        ]  # fmt: skip
        outs = [p.communicate()[0] for p in procs]
        elapsed = time.perf_counter() - t
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    finished = sum(
        1 for out in outs for o in (json.loads(out)["jobs"] if out.strip() else []) if o["result"] not in ("lost",)
    )
    for path in [repo, bare, *clones]:
        shutil.rmtree(path, ignore_errors=True)
    return finished / elapsed


# -- big outputs --------------------------------------------------------------------------------
def big_job(files: int, each: int, kind: str) -> tuple[str, str]:
    """A repository with one done job whose outputs are `files` files of `each` bytes."""
    from git_genjob.planner.ledger import claim
    from git_genjob.planner.queue import submit
    from git_genjob.storage.publish import publisher
    from git_genjob.storage.records import load_live
    from git_genjob.storage.store import Store
    from git_genjob.worker.run import run_claimed

    repo = make_repo(2)
    keypath = trusted_key(repo)
    with open(os.path.join(repo, ".genjob", "config.toml"), "w") as fh:
        fh.write(f"[limits]\nfile_bytes = {each + 1024}\nreceipt_bytes = {files * each + 1024}\n")
    subprocess.run(["git", "-C", repo, "commit", "-qam", "limits"], check=True)
    store = Store.open(repo)
    paths = [f"big{i}.bin" for i in range(files)]
    res = submit(store, "make big files", [], creates=paths)
    rnd = random.Random(7)
    text = b"".join(b"    value_%d = compute(%d, 'text')  # line\n" % (i, rnd.randrange(10**6)) for i in range(4096))

    def make(path: str, old: bytes | None) -> bytes:
        if kind == "random":
            return os.urandom(each)
        head = b"# %s\n" % path.encode()  # files differ: a blob shared by two paths is hashed once
        return (head + text * (each // len(text) + 1))[:each]

    opts = worker_opts(keypath, PyGen(make))
    record = load_live(store, res.key)
    assert record is not None
    pub = publisher(store)
    lease = claim(pub, record, "bench", 600)
    assert run_claimed(pub, lease, opts, lambda _: None).result == "ok"
    return repo, res.key


def row_verify_throughput(mb: int) -> list[Row]:
    from git_genjob.landing.verify import verify
    from git_genjob.storage.store import Store

    rows = []
    for kind in ("random", "text"):
        files = max(1, mb // 16)
        repo, key = big_job(files, mb * MiB // files, kind)
        store = Store.open(repo)
        blobs = [
            store.read(o, limit=None)
            for o in store.tree_files(store.get_commit(store.ref_target(f"refs/genjob/jobs/{key}")).tree).values()
        ]
        blobs = [b for b in blobs if len(b) >= MiB]
        v, h = [], []
        for _ in range(5):
            t = time.perf_counter()
            assert verify(Store.open(repo), key).ok
            v.append(time.perf_counter() - t)
            t = time.perf_counter()
            for b in blobs:
                hashlib.sha256(b).digest()
            h.append(time.perf_counter() - t)
        vm, hm = median_ms(v), median_ms(h)
        rows.append(
            Row(
                f"verify {mb} MB ({kind}) vs raw sha256",
                "≤ 1.25x",
                f"{vm:.0f} ms ({mb / vm * 1000:.0f} MB/s)",
                f"{hm:.0f} ms",
                vm / hm,
                vm / hm <= 1.25,
                {"verify_ms": vm, "sha256_ms": hm, "mb": mb},
            )
        )
        shutil.rmtree(repo, ignore_errors=True)
    return rows


# -- merged apply (SPEC §11) ----------------------------------------------------------------------
def row_merged_apply(runs: int, lines: int = 2000) -> list[Row]:
    """apply of a job whose file a teammate changed elsewhere (a 3-way merge) vs a plain apply."""
    from git_genjob.landing.apply import apply
    from git_genjob.planner.ledger import claim
    from git_genjob.planner.queue import submit
    from git_genjob.storage.publish import publisher
    from git_genjob.storage.records import load_live
    from git_genjob.storage.store import Store
    from git_genjob.worker.run import run_claimed

    repo = make_repo(20)
    keypath = trusted_key(repo)
    target = os.path.join(repo, "src", "big.py")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w") as fh:
        fh.writelines(f"value_{i} = {i}\n" for i in range(lines))
    subprocess.run(["git", "-C", repo, "add", "-A"], check=True)
    subprocess.run(["git", "-C", repo, "commit", "-qm", "a big file"], check=True)

    def edit_line(n: int, text: str) -> Callable[[str, bytes | None], bytes]:
        def make(path: str, old: bytes | None) -> bytes:
            rows = (old or b"").splitlines(keepends=True)
            rows[n] = text.encode() + b"\n"
            return b"".join(rows)

        return make

    def done_job(i: int) -> str:
        store = Store.open(repo)
        res = submit(store, f"edit line 10, run {i}", ["src/big.py"])
        record = load_live(store, res.key)
        assert record is not None
        pub = publisher(store)
        lease = claim(pub, record, "bench", 600)
        opts = worker_opts(keypath, PyGen(edit_line(10, f"value_10 = {i}  # the job")))
        assert run_claimed(pub, lease, opts, lambda _: None).result == "ok"
        return res.key

    plain, merged = [], []
    for i in range(runs):
        key = done_job(2 * i)
        t = time.perf_counter()
        assert apply(Store.open(repo), key).merged_onto is None
        plain.append(time.perf_counter() - t)
        key = done_job(2 * i + 1)
        with open(target, "rb") as fh:
            rows = fh.read().splitlines(keepends=True)
        rows[lines - 10] = f"value_{lines - 10} = {i}  # a teammate\n".encode()
        with open(target, "wb") as fh:
            fh.writelines(rows)
        subprocess.run(["git", "-C", repo, "commit", "-qam", "a teammate"], check=True)
        t = time.perf_counter()
        assert apply(Store.open(repo), key).merged_onto is not None
        merged.append(time.perf_counter() - t)
    shutil.rmtree(repo, ignore_errors=True)
    pm, mm = median_ms(plain), median_ms(merged)
    return [
        Row(
            f"merged apply ({lines}-line file, a teammate's change elsewhere) vs plain apply",
            "≤ 2x",
            f"{mm:.0f} ms",
            f"{pm:.0f} ms",
            mm / pm,
            mm / pm <= 2,
            {"merged_ms": mm, "plain_ms": pm, "runs": runs, "lines": lines},
        )
    ]


def row_peak_rss(shapes: list[tuple[int, int]]) -> list[Row]:
    rows = []
    base_el, base_rss, _ = child_run(["-h"], HERE)
    for files, each in shapes:
        repo, key = big_job(files, each, "random")
        _, v_rss, rc1 = child_run(["verify", key], repo)
        _, a_rss, rc2 = child_run(["apply", key], repo)
        assert rc1 == 0 and rc2 == 0
        total = files * each // MiB
        rows.append(
            Row(
                f"peak RSS, verify / apply of {files}×{each // MiB} MiB",
                "< 100 MiB",
                f"{v_rss:.0f} / {a_rss:.0f} MiB",
                f"{base_rss:.0f} MiB (`git genjob -h`)",
                max(v_rss, a_rss) / base_rss,
                max(v_rss, a_rss) < 100,
                {"verify_mib": v_rss, "apply_mib": a_rss, "imports_mib": base_rss, "total_mib": total},
            )
        )
        shutil.rmtree(repo, ignore_errors=True)
    return rows


# -- the gateway (issue 33) ---------------------------------------------------------------------
def row_gateway(calls: int, endless_mib: int) -> list[Row]:
    """Overhead per call, a 1 MB stream, a replayed session and the memory of an endless answer."""
    import bench_gateway as bg

    repo = make_repo(2)
    o = bg.overhead(repo, calls)
    r = bg.replay(repo)
    up = bg.Upstream(endless=endless_mib * MiB)
    script = os.path.join(HERE, "bench_gateway.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE), *sys.path])}
    t = time.perf_counter()
    out = subprocess.run([sys.executable, script, "child", up.url, repo], capture_output=True, text=True, env=env)
    cut_s = time.perf_counter() - t
    up.close()
    child = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"hwm_kb": 0, "cut": False}
    base_el, base_rss, _ = child_run(["-h"], HERE)
    shutil.rmtree(repo, ignore_errors=True)
    added = o["plain_gateway_ms"] - o["plain_direct_ms"]
    stream_ratio = o["stream_gateway_ms"] / o["stream_direct_ms"]
    first_added = o["first_byte_gateway_ms"] - o["first_byte_direct_ms"]
    speedup = r["live_s"] / r["replay_s"]
    hwm = child["hwm_kb"] / 1024
    return [
        Row("gateway: added per plain call (1 KB answer, recorded)", "≤ 2 ms", f"{added:.1f} ms",
            f"{o['plain_direct_ms']:.1f} ms direct", o["plain_gateway_ms"] / o["plain_direct_ms"], added <= 2, o),
        Row("gateway: a 1 MB streamed answer", "≤ 1.2x", f"{o['stream_gateway_ms']:.1f} ms",
            f"{o['stream_direct_ms']:.1f} ms direct", stream_ratio, stream_ratio <= 1.2),
        Row("gateway: first byte of a stream, added", "≤ 2 ms", f"{first_added:.1f} ms",
            f"{o['first_byte_direct_ms']:.1f} ms direct", None, first_added <= 2),
        Row("gateway: replay of a 20-call session (200 ms a call live)", "≥ 10x, 0 sent",
            f"{r['replay_s'] * 1000:.0f} ms, {r['replay_requests']} sent", f"{r['live_s'] * 1000:.0f} ms live",
            speedup, speedup >= 10 and r["replay_requests"] == 0, r),
        Row(f"gateway: peak RSS of an endless answer ({endless_mib} MiB sent, cut at the limit)", "< 100 MiB",
            f"{hwm:.0f} MiB, cut={child['cut']}, {cut_s:.1f} s", f"{base_rss:.0f} MiB (`git genjob -h`)",
            hwm / base_rss if base_rss else None, hwm < 100 and child["cut"], child),
    ]  # fmt: skip


# -- processes --------------------------------------------------------------------------------
def row_startup(runs: int) -> list[Row]:
    def med(argv: list[str]) -> float:
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t)
        return median_ms(times)

    bare = med([sys.executable, "-c", "pass"])
    helpt = med([sys.executable, "-m", "git_genjob", "-h"])
    repo = make_repo()
    t0 = time.perf_counter()
    st = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "git_genjob", "status"], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        st.append(time.perf_counter() - t)
    del t0
    return [
        Row("start-up: `git genjob -h`", "—", f"{helpt:.0f} ms", f"{bare:.0f} ms (`python -c pass`)", helpt / bare),
        Row("start-up: `git genjob status`", "—", f"{median_ms(st):.0f} ms", f"{bare:.0f} ms", median_ms(st) / bare),
    ]


def sandbox_attempt_s(mechanism: str) -> float:
    """Seconds for one exec attempt's sandbox under `mechanism` ("none": unconfined): confine()
    + Popen + wait of `sh -c true` in a fresh scratch. bench_sandbox.py runs it against older
    checkouts too, whose launch may lack `start` and `fds`."""
    try:
        from git_genjob.worker.generators.sandbox.confine import confine
        from git_genjob.worker.generators.sandbox.options import Attempt, SandboxOptions
    except ImportError:  # a checkout from before the sandbox was a package (bench_sandbox.py's OLD)
        from git_genjob.worker.generators.sandbox import Attempt, SandboxOptions, confine

    d = tempfile.mkdtemp(prefix="genjob-scratch-bench-")
    try:
        for sub in ("work", "meta"):
            os.makedirs(os.path.join(d, sub))
        files = [os.path.join(d, "meta", n) for n in ("job.json", "instruction.txt", "generator.log")]
        for f in files:
            open(f, "w").close()
        attempt = Attempt(os.path.join(d, "work"), files[:2], files[2], os.path.join(d, "home"), os.path.join(d, "tmp"))
        t = time.perf_counter()
        launch = confine(mechanism, SandboxOptions(), "true", attempt, os.environ.get("PATH", os.defpath))
        start = getattr(launch, "start", lambda popen: popen())
        proc = start(lambda: subprocess.Popen(
            launch.argv, cwd=attempt.scratch, env={**os.environ, **launch.env}, preexec_fn=launch.preexec,
            pass_fds=getattr(launch, "fds", ()), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))  # fmt: skip
        launch.close()
        assert proc.wait() == 0, mechanism
        return time.perf_counter() - t
    finally:
        shutil.rmtree(d, ignore_errors=True)


def row_sandbox(runs: int) -> list[Row]:
    """What the exec generator's sandbox adds to each attempt: set-up (bind list or Landlock
    ruleset, process-limit count) plus start and exit of `sh -c true` inside it, against the
    same without a sandbox."""
    from git_genjob.worker.generators.sandbox.choose import bwrap_problem, landlock_problem

    once = sandbox_attempt_s
    # A launch that needs Python in the child forks this process, at a cost that grows with its
    # memory (what earlier groups left): recorded with the figure.
    try:
        with open("/proc/self/status") as fh:
            rss = next((int(line.split()[1]) / 1024 for line in fh if line.startswith("VmRSS:")), None)
    except OSError:
        rss = None
    base = median_ms([once("none") for _ in range(runs)])
    rows = []
    for mechanism, problem in (("bwrap", bwrap_problem()), ("landlock", landlock_problem(False))):
        if problem is not None:
            rows.append(Row(f"sandbox start-up per attempt ({mechanism})", "< 20 ms median", f"not usable: {problem}"))
            continue
        med = median_ms([once(mechanism) for _ in range(runs)])
        rows.append(
            Row(
                f"sandbox start-up per attempt ({mechanism})",
                "< 20 ms median",
                f"{med - base:.1f} ms",
                f"{base:.1f} ms (`sh -c true` unconfined)",
                med / base if base else None,
                med - base < 20,
                {"confined_ms": med, "unconfined_ms": base, "runs": runs, "bench_rss_mib": rss},
            )
        )
    return rows


EXITS = "import os, time\ntime.sleep(0.02)\nos.write(1, repr(time.monotonic()).encode())\nos._exit(0)\n"


def row_exit_notice(runs: int) -> list[Row]:
    """How long after an exec generator exits the worker notices (`exec._wait`, a pidfd), against
    a blocking `waitpid` on the same kind of child: each child writes CLOCK_MONOTONIC (one clock
    for every process) 20 ms after it starts, while the wait is under way, and leaves with
    `_exit`; the notice is the wait's return on that clock."""
    import threading

    from git_genjob.worker.generators.base import GenContext
    from git_genjob.worker.generators.exec import _wait

    ctx = GenContext(None, "", "", "", {}, 10, threading.Event())  # type: ignore[arg-type]

    def once(waiter: Callable[[subprocess.Popen[bytes]], object]) -> float:
        proc = subprocess.Popen([sys.executable, "-S", "-c", EXITS], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        waiter(proc)
        noticed = time.monotonic()
        stamp = float(proc.stdout.read() or b"nan")
        proc.stdout.close()
        return noticed - stamp

    worker, blocking = [], []
    for _ in range(runs):  # interleaved, so that other load hits both alike
        worker.append(once(lambda p: _wait(p, time.monotonic() + 10, ctx)))
        blocking.append(once(lambda p: p.wait()))
    w, b = median_ms(worker), median_ms(blocking)
    return [
        Row(
            "exec generator: from its exit to the worker noticing",
            "≤ 1 ms",
            f"{w:.2f} ms",
            f"{b:.2f} ms (a blocking `waitpid`)",
            w / b if b else None,
            w <= 1,
            {"worker_ms": w, "waitpid_ms": b, "runs": runs},
        )
    ]


def row_cli_round_trip(runs: int) -> Row:
    repo = make_repo()
    keypath = trusted_key(repo)
    gj = [sys.executable, "-m", "git_genjob"]
    times = []
    for i in range(runs):
        t = time.perf_counter()
        out = subprocess.run(
            gj + ["submit", "-m", f"cli {i}", f"f{i % 20}.py", "--json"],
            cwd=repo,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        key = json.loads(out)["key"]
        subprocess.run(
            gj
            + ["work", "--generator", f"exec:echo '# cli' >> f{i % 20}.py", "--signing-key", keypath, "--once", "-q"],
            cwd=repo,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run(gj + ["verify", key], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(gj + ["apply", key], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(gj + ["status"], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return Row("CLI round trip (submit, work, verify, apply, status)", "—", f"{median_ms(times):.0f} ms")


# -- where people wait (issue 24) -------------------------------------------------------------
def row_hooks(rounds: int) -> list[Row]:
    """git commit / git push with genjob's hooks beside the same command without (bench_hooks)."""
    import bench_hooks

    m = bench_hooks.measure(rounds)
    rows = []
    for name, col, base, limit in (
        ("`git commit` with the hooks, 0 live jobs", "commit_hooks0", "commit", 30),
        ("`git commit` with the hooks, 10 live jobs", "commit_hooks10", "commit", 45),
        ("`git push` with the hooks, no genjob commit", "push_hooks", "push", 35),
    ):
        extra = m[col] - m[base]
        rows.append(
            Row(
                name,
                f"≤ +{limit} ms",
                f"+{extra:.1f} ms ({m[col]:.1f} ms; CPU +{m[col + '_cpu'] - m[base + '_cpu']:.1f} ms)",
                f"{m[base]:.1f} ms (`git {base}`, no hooks; CPU {m[base + '_cpu']:.1f} ms)",
                m[col] / m[base],
                extra <= limit,
                {"ms": m},
            )
        )
    return rows


def _cli_ms(
    argv: list[str],
    cwd: str,
    runs: int,
    each: Callable[[int], list[str]] | None = None,
    prep: Callable[[], None] | None = None,
) -> tuple[float, float]:
    """Medians (ms) of `git genjob ARGV` as a process (`each(i)`: per-run arguments; `prep()`
    run untimed before each) and of `python -c pass` run just before each, so that other load
    hits both alike."""
    import bench_hooks

    times, bare = [], []
    for i in range(runs):
        if prep is not None:
            prep()
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=bench_hooks.child_env())
        bare.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "git_genjob", *argv, *(each(i) if each else [])],
            cwd=cwd,
            check=True,
            capture_output=True,
            env=bench_hooks.child_env(),
        )
        times.append(time.perf_counter() - t)
    return median_ms(times), median_ms(bare)


def row_commands(runs: int) -> list[Row]:
    """Everyday commands as processes against the bare interpreter (`python -c pass`)."""
    from git_genjob.planner.queue import submit
    from git_genjob.storage.store import Store

    repo = make_repo()
    keypath = trusted_key(repo)
    store = Store.open(repo)
    opts = worker_opts(keypath, PyGen(append_line))
    done = [_done_job(store, opts, i) for i in range(runs + 2)]
    for i in range(10):
        submit(store, f"queued {i}", [f"f{10 + i % 10}.py"], key=f"queued-{i}")

    def forget(name: str) -> Callable[[], None]:
        """Drop a derived memo of .git/genjob/, as a change to what it stamps would: the first
        run after a job moved pays the whole read (issue 24's fast paths)."""
        path = os.path.join(repo, ".git", "genjob", name)

        def drop() -> None:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.exists(path):
                os.unlink(path)

        return drop

    figures = [
        ("status", "≤ 2.5x", 2.5, _cli_ms(["status"], repo, runs)),
        ("status, first after a change", "—", None, _cli_ms(["status"], repo, runs, prep=forget("status-out"))),
        ("verify KEY", "≤ 2.5x", 2.5, _cli_ms(["verify", done[0]], repo, runs)),
        (
            "verify KEY, first after a change",
            "—",
            None,
            _cli_ms(["verify", done[0]], repo, runs, prep=forget("verify-out")),
        ),
        ("show KEY", "≤ 2.5x", 2.5, _cli_ms(["show", done[0]], repo, runs)),
        ("show KEY, first after a change", "—", None, _cli_ms(["show", done[0]], repo, runs, prep=forget("show-out"))),
        ("log", "≤ 2.5x", 2.5, _cli_ms(["log"], repo, runs)),
        ("log, first after a change", "—", None, _cli_ms(["log"], repo, runs, prep=forget("log-out"))),
        ("submit", "≤ 4x", 4.0, _cli_ms(["submit", "-m"], repo, runs, lambda i: [f"cli {i}", f"f{i % 10}.py"])),
        ("apply KEY", "≤ 4x", 4.0, _cli_ms(["apply"], repo, runs, lambda i: [done[i + 2]])),
    ]
    shutil.rmtree(repo, ignore_errors=True)
    return [
        Row(
            f"`git genjob {name}` (10 queued)",
            target,
            f"{ms:.0f} ms",
            f"{bare:.0f} ms (`python -c pass`)",
            ms / bare,
            None if limit is None else ms / bare <= limit,
        )
        for name, target, limit, (ms, bare) in figures
    ]


def _done_job(store: Any, opts: Any, i: int) -> str:
    from git_genjob.planner.ledger import claim
    from git_genjob.planner.queue import submit
    from git_genjob.storage.publish import publisher
    from git_genjob.storage.records import load_live
    from git_genjob.worker.run import run_claimed

    res = submit(store, f"done {i}", [f"f{i % 10}.py"], key=f"done-{i}")
    record = load_live(store, res.key)
    assert record is not None
    pub = publisher(store)
    outcome = run_claimed(pub, claim(pub, record, opts.worker_id, opts.lease_s), opts, lambda _: None)
    assert outcome.result == "ok", outcome
    return str(res.key)


def row_ask(runs: int) -> list[Row]:
    """`git genjob ask` answered from the replay cache, against the stdlib script a user would
    write instead (bench/baseline/askreplay.py) and a plain HTTP call to a local stub."""
    import threading
    import urllib.request
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import bench_hooks
    from baseline import askreplay

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"choices": [{"message": {"content": "hello\n"}, "finish_reason": "stop"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    repo = make_repo()
    trusted_key(repo)
    prompt = os.path.join(repo, ".git", "prompt.txt")
    with open(prompt, "w") as fh:
        fh.write("Write hello.\n")
    argv = ["ask", "--endpoint", f"openai:{url}/v1", "--model", "m1", "--prompt-file", prompt]
    out = os.path.join(repo, ".git", "out.txt")
    _cli_ms([*argv, "--out-file", out], repo, 1)  # the miss: asks the stub and records
    _cli_ms([*argv, "--out-file", out], repo, 1)  # the first hit decides through the cache and remembers
    store_dir = os.path.join(repo, ".git", "model_replays")
    askreplay.record(store_dir, "m1", "Write hello.\n", "hello\n")
    script = os.path.join(HERE, "baseline", "askreplay.py")
    served = os.path.join(repo, ".git", "genjob", "replay-served")
    hits, slow, times, curl = [], [], [], []
    for _ in range(runs):  # interleaved: other load hits each alike
        hits.append(_cli_ms([*argv, "--out-file", out], repo, 1)[0])
        # the first hit after the cache or the trust store moved decides through the cache again
        drop = lambda: shutil.rmtree(served, ignore_errors=True)  # noqa: E731
        slow.append(_cli_ms([*argv, "--out-file", out], repo, 1, prep=drop)[0])
        t = time.perf_counter()
        subprocess.run([sys.executable, script, "m1", prompt, out, store_dir], check=True, env=bench_hooks.child_env())
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        req = urllib.request.Request(f"{url}/v1/chat/completions", data=b"{}", method="POST")
        urllib.request.urlopen(req, timeout=10).read()
        curl.append(time.perf_counter() - t)
    server.shutdown()
    server.server_close()
    shutil.rmtree(repo, ignore_errors=True)
    base, genjob = median_ms(times), statistics.median(hits)
    return [
        Row(
            "`git genjob ask`, replay hit",
            "≤ 1.5x the script",
            f"{genjob:.0f} ms",
            f"{base:.0f} ms (bench/baseline/askreplay.py; an HTTP call to a local stub, in-process: "
            f"{median_ms(curl):.1f} ms)",
            genjob / base,
            genjob / base <= 1.5,
        ),
        Row(
            "`git genjob ask`, replay hit, first after the cache moved",
            "—",
            f"{statistics.median(slow):.0f} ms",
            f"{base:.0f} ms (bench/baseline/askreplay.py)",
            statistics.median(slow) / base,
            None,
        ),
    ]


def render(rows: list[Row]) -> str:
    lines = ["| figure | target | measured | baseline (same run) | ratio | met |", "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        met = "" if r.ok is None else ("yes" if r.ok else "**no**")
        lines.append(f"| {r.name} | {r.target} | {r.measured} | {r.baseline} | {ratio} | {met} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run, under a minute; .ci/run runs it)")
    ap.add_argument("--out", default=os.path.join(HERE, "results.json"), help="where to write the results")
    ap.add_argument(
        "--only",
        help="comma-separated row groups: "
        "trip,fsync,scale,queue,claims,fleet,remote,verify,merge,rss,startup,sandbox,exit,cli,hooks,commands,ask,gateway",
    )
    args = ap.parse_args()
    q = args.quick
    groups: dict[str, Callable[[], list[Row]]] = {
        "trip": lambda: row_round_trip(8 if q else 40),
        "fsync": lambda: row_fsyncs(5 if q else 10),
        "scale": lambda: row_scale([1000, 3000] if q else [1000, 10000, 100000], 200 if q else 1000, 10 if q else 50),
        "queue": lambda: row_claim_next_queued([100, 1000] if q else [100, 1000, 10000]),
        "claims": lambda: [row_claims_per_second([1, 2, 4], 300 if q else 2000, 2 if q else 5)],
        "fleet": lambda: [
            row_fleet_claims([1, 4, 16], 60 if q else 400, 2 if q else 8, 1 if q else 3),
            row_fleet_sharded([1, 4, 16], 60 if q else 400),
        ],
        "remote": lambda: row_remote_workers([1, 4], 8 if q else 60),
        "verify": lambda: row_verify_throughput(24 if q else 100),  # an output over the 16 MiB document limit
        "merge": lambda: row_merged_apply(3 if q else 9),
        "rss": lambda: row_peak_rss([(2, 8 * MiB)] if q else [(16, 16 * MiB), (1, 256 * MiB)]),
        "startup": lambda: row_startup(5 if q else 20),
        "sandbox": lambda: row_sandbox(10 if q else 50),
        "exit": lambda: row_exit_notice(10 if q else 50),
        "cli": lambda: [row_cli_round_trip(3 if q else 10)],
        "hooks": lambda: row_hooks(5 if q else 20),
        "commands": lambda: row_commands(3 if q else 10),
        "ask": lambda: row_ask(3 if q else 10),
        "gateway": lambda: row_gateway(20 if q else 200, 300 if q else 2048),
    }
    chosen = args.only.split(",") if args.only else list(groups)
    rows: list[Row] = []
    started = time.perf_counter()
    for name in chosen:
        t = time.perf_counter()
        print(f"bench: {name} …", file=sys.stderr, flush=True)
        rows += groups[name]()
        print(f"bench: {name} took {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    table = render(rows)
    print(table)
    doc = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "quick": q,
        "seconds": round(time.perf_counter() - started, 1),
        "rows": [r.__dict__ for r in rows],
        "table": table,
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    print(f"bench: wrote {args.out} in {doc['seconds']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
