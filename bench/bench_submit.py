"""Mint and store N jobs through the library, then list them; prints medians.

Usage: python bench/bench_submit.py [N ...]   (default 1000 10000)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(n: int) -> dict[str, float]:
    from git_genjob.planner.queue import status, submit
    from git_genjob.storage.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "b",
            "GIT_AUTHOR_EMAIL": "b@x",
            "GIT_COMMITTER_NAME": "b",
            "GIT_COMMITTER_EMAIL": "b@x",
        }
        subprocess.run(["git", "init", "-q", tmp], check=True, env=env)
        for i in range(20):
            with open(os.path.join(tmp, f"f{i}.py"), "w") as fh:
                fh.write(f"x = {i}\n")
        subprocess.run(["git", "-C", tmp, "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", tmp, "commit", "-qm", "i"], check=True, env=env)
        os.environ.update(env)
        store = Store.open(tmp)
        per_submit = []
        start = time.perf_counter()
        for i in range(n):
            t = time.perf_counter()
            submit(store, f"job {i}", [f"f{i % 20}.py"], key=f"k{i}", rev="HEAD")
            per_submit.append(time.perf_counter() - t)
        total = time.perf_counter() - start
        t = time.perf_counter()
        rows = status(store)
        list_s = time.perf_counter() - t
        assert len(rows) == n
        t = time.perf_counter()
        submit(store, "job 0", ["f0.py"], key="k0", rev="HEAD")  # idempotent collapse
        again_ms = (time.perf_counter() - t) * 1000
        return {
            "n": n,
            "submit_median_ms": statistics.median(per_submit) * 1000,
            "submit_total_s": total,
            "list_s": list_s,
            "idempotent_resubmit_ms": again_ms,
        }


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 10000]
    for n in sizes:
        r = run(n)
        print(
            f"N={r['n']:>6}  submit median {r['submit_median_ms']:.2f} ms  total {r['submit_total_s']:.1f} s  "
            f"list {r['list_s']:.2f} s  idempotent resubmit {r['idempotent_resubmit_ms']:.2f} ms"
        )


if __name__ == "__main__":
    main()
