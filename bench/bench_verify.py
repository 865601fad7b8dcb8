"""verify throughput on large outputs against hashlib over the same bytes, and apply latency.

Usage: python bench/bench_verify.py [MB]   (default 100)
"""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import make_repo, trusted_key  # noqa: E402


def main() -> None:
    mb = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    from git_genjob.landing.apply import apply
    from git_genjob.landing.verify import verify
    from git_genjob.planner.queue import submit
    from git_genjob.storage.store import Store

    repo = make_repo()
    key = trusted_key(repo)
    with open(os.path.join(repo, ".genjob", "config.toml"), "w") as fh:
        fh.write("[limits]\nfile_bytes = 67108864\n")
    subprocess.run(["git", "-C", repo, "commit", "-qam", "limits"], check=True)
    store = Store.open(repo)
    n_files = max(1, mb // 16)
    paths = [f"big{i}.bin" for i in range(n_files)]
    job = submit(store, "make big files", [], creates=paths)
    per = mb * 1024 * 1024 // n_files
    cmd = " && ".join(f"head -c {per} /dev/urandom > {p}" for p in paths)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "git_genjob",
            "work",
            "--generator",
            f"exec:{cmd}",
            "--signing-key",
            key,
            "-q",
            "--once",
        ],
        cwd=repo,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    data = [
        store.read(o, limit=None)
        for o in store.tree_files(store.get_commit(store.ref_target(f"refs/genjob/jobs/{job.key}")).tree).values()
        if len(store.read(o, limit=None)) == per
    ]  # type: ignore[arg-type]
    v_times, h_times = [], []
    for _ in range(5):
        t = time.perf_counter()
        verdict = verify(Store.open(repo), job.key)
        v_times.append(time.perf_counter() - t)
        assert verdict.ok, verdict.failures()
        t = time.perf_counter()
        for d in data:
            hashlib.sha256(d).hexdigest()
        h_times.append(time.perf_counter() - t)
    v, h = statistics.median(v_times), statistics.median(h_times)
    print(
        f"verify {mb} MB of outputs: median {v * 1000:.0f} ms ({mb / v:.0f} MB/s); "
        f"hashlib sha256 of the same bytes: {h * 1000:.0f} ms; ratio {v / h:.2f}x"
    )
    t = time.perf_counter()
    apply(Store.open(repo), job.key)
    ms = (time.perf_counter() - t) * 1000
    print(f"apply (verify + commit + work tree + note + archive) of the same job: {ms:.0f} ms")


if __name__ == "__main__":
    main()
