"""The exec sandbox's start-up cost per attempt, two checkouts interleaved (docs/performance.md).

    python bench/bench_sandbox.py [--rounds 6] [--attempts 10] [--heap-mib 0 --heap-mib 192] OLD [NEW]

Each round starts one child process per checkout (alternating which goes first) with that
checkout on PYTHONPATH; the child first fills --heap-mib of memory (a launch that runs Python in
the child forks the launching process, at a cost that grows with its memory: a worker holds
about 40 MiB, the full bench/run's process 190 MiB by the sandbox row), then times what
bench/run's sandbox row times: confine() + Popen + wait of `sh -c true` under each mechanism,
and the same `sh -c true` unconfined. NEW defaults to this checkout. Prints medians of all
attempts and the ratio NEW/OLD of what the sandbox adds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = r"""
import json, os, shutil, subprocess, sys, tempfile, time
heap = bytearray(int(sys.argv[2]) << 20)
for i in range(0, len(heap), 4096):
    heap[i] = 1
sys.path.insert(0, sys.argv[3])  # this checkout's bench/: the attempt bench/run's sandbox row times
from suite import sandbox_attempt_s
try:
    from git_genjob.worker.generators.sandbox.choose import bwrap_problem, landlock_problem
except ImportError:  # a checkout from before the sandbox was a package
    from git_genjob.worker.generators.sandbox import bwrap_problem, landlock_problem

def once(mechanism):
    return sandbox_attempt_s(mechanism) * 1e3

usable = [m for m, why in (("bwrap", bwrap_problem()), ("landlock", landlock_problem(False))) if why is None]
out = {m: [] for m in ["none", *usable]}
for m in usable:
    once(m)  # warm: probes, page cache
for _ in range(int(sys.argv[1])):
    for m in out:
        out[m].append(once(m))
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", help="a checkout of the code to compare against (e.g. git worktree add /tmp/base main)")
    ap.add_argument("new", nargs="?", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--attempts", type=int, default=10, help="attempts per mechanism per round and checkout")
    ap.add_argument("--heap-mib", type=int, action="append", help="memory the launching process holds (repeatable)")
    args = ap.parse_args()
    trees = [("old", os.path.abspath(args.old)), ("new", os.path.abspath(args.new))]
    for heap in args.heap_mib or [0]:
        res: dict[str, dict[str, list[float]]] = {name: {} for name, _ in trees}
        for r in range(args.rounds):
            for name, path in trees if r % 2 == 0 else trees[::-1]:
                env = {**os.environ, "PYTHONPATH": path}
                argv = [sys.executable, "-c", CHILD, str(args.attempts), str(heap), HERE]
                done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd="/", check=True, timeout=600)
                for mech, times in json.loads(done.stdout).items():
                    res[name].setdefault(mech, []).extend(times)
        n = args.rounds * args.attempts
        print(f"heap {heap} MiB, {args.rounds} rounds x {args.attempts} attempts per checkout, interleaved")
        base_old, base_new = statistics.median(res["old"]["none"]), statistics.median(res["new"]["none"])
        print(f"  `sh -c true` unconfined: old {base_old:.2f} ms, new {base_new:.2f} ms (n={n} each)")
        for mech in [m for m in res["old"] if m != "none"]:
            old = statistics.median(res["old"][mech]) - base_old
            new = statistics.median(res["new"][mech]) - base_new
            print(f"  {mech:9s} adds: old {old:6.2f} ms, new {new:6.2f} ms, new/old {new / old:.2f}")


if __name__ == "__main__":
    main()
