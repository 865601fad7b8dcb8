"""Jobs per second with 1, 2 and 4 local worker processes (exec:true), and remote claim latency.

Usage: python bench/bench_worker.py [JOBS]   (default 40)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import make_repo, trusted_key  # noqa: E402


def local(workers: int, jobs: int) -> float:
    from git_genjob.planner.queue import submit
    from git_genjob.storage.store import Store

    repo = make_repo()
    key = trusted_key(repo)
    store = Store.open(repo)
    for i in range(jobs):
        submit(store, f"job {i}", [f"f{i % 20}.py"], key=f"k{i}", rev="HEAD")
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "git_genjob",
                "work",
                "--generator",
                "exec:true",
                "--signing-key",
                key,
                "--worker-id",
                f"w{n}",
                "-q",
            ],
            cwd=repo,
            stdout=subprocess.DEVNULL,
        )
        for n in range(workers)
    ]
    for p in procs:
        p.wait()
    return jobs / (time.perf_counter() - start)


def remote_claim_latency(rounds: int = 10) -> float:
    from git_genjob.planner.ledger import claim
    from git_genjob.planner.queue import submit
    from git_genjob.storage.publish import publisher
    from git_genjob.storage.records import load_live
    from git_genjob.storage.store import Store

    repo = make_repo()
    bare = repo + "-remote.git"
    subprocess.run(["git", "init", "-q", "--bare", bare], check=True)
    subprocess.run(["git", "-C", repo, "remote", "add", "origin", bare], check=True)
    store = Store.open(repo)
    for i in range(rounds):
        submit(store, f"job {i}", ["f0.py"], key=f"r{i}", rev="HEAD")
    from git_genjob.storage.remote import push

    push(store, "origin")
    times = []
    pub = publisher(store, "origin")
    for i in range(rounds):
        pub.refresh()
        record = load_live(store, f"r{i}")
        assert record is not None
        t = time.perf_counter()
        claim(pub, record, "w", 60)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    base = None
    for workers in (1, 2, 4):
        rate = local(workers, jobs)
        base = base or rate
        print(f"{workers} worker(s): {rate:.1f} jobs/s ({rate / base:.2f}x of 1 worker), {jobs} jobs, exec:true")
    print(f"remote claim (leased git push to a local bare repo): median {remote_claim_latency():.0f} ms")


if __name__ == "__main__":
    main()
