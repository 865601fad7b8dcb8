"""Start-up: `git genjob -h` and the hook entries against the bare interpreter, medians of N runs.

Usage: python bench/bench_startup.py [N]   (default 20; uses the git-genjob next to this python)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time


def median_ms(argv: list[str], cwd: str, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    exe = os.path.join(os.path.dirname(sys.executable), "git-genjob")
    with tempfile.TemporaryDirectory() as repo:
        subprocess.run(["git", "init", "-q", repo], check=True)
        msg = os.path.join(repo, "msg")
        with open(msg, "w") as fh:
            fh.write("subject\n\nbody\n")
        base = median_ms([sys.executable, "-c", "pass"], repo, n)
        rows = [
            ("python -c pass (baseline)", base),
            ("git-genjob -h", median_ms([exe, "-h"], repo, n)),
            ("git-genjob hook pre-commit (no live jobs)", median_ms([exe, "hook", "pre-commit"], repo, n)),
            ("git-genjob hook commit-msg (no trailers)", median_ms([exe, "hook", "commit-msg", msg], repo, n)),
            ("git-genjob status (empty repo, loads pygit2 and click)", median_ms([exe, "status"], repo, n)),
        ]
    for name, ms in rows:
        print(f"{name:<55} {ms:7.1f} ms  ({ms / base:.1f}x baseline)")


if __name__ == "__main__":
    main()
