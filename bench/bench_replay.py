"""Replay-cache hit latency, in-process and through the CLI, with N fingerprints stored.

Usage: python bench/bench_replay.py [N]   (default 100000)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import pygit2

sys.path.insert(0, os.path.dirname(__file__))
from common import make_repo  # noqa: E402


def fill(repo: str, n: int) -> None:
    """N recorded entries written in bulk (one commit), the same layout Cache.add writes."""
    from git_genjob.documents.canonical import canonical_bytes, sha256_hex
    from git_genjob.storage.layout import REPLAYS_REF
    from git_genjob.storage.store import RefUpdate, Store

    store = Store.open(repo)
    r = pygit2.Repository(store.gitdir)
    answer = r.create_blob(b"hello\n")
    sha = sha256_hex(b"hello\n")
    shards: dict[str, pygit2.TreeBuilder] = {}
    for i in range(n):
        fp = sha256_hex(f"fp {i}".encode())
        ev = canonical_bytes({"type": "recorded", "answer": sha, "time": "2026-12-02T00:00:00.000Z", "host": "b"})
        events = r.TreeBuilder()
        events.insert(sha256_hex(ev) + ".json", r.create_blob(ev), pygit2.enums.FileMode.BLOB)
        answers = r.TreeBuilder()
        answers.insert(sha, answer, pygit2.enums.FileMode.BLOB)
        entry = r.TreeBuilder()
        entry.insert("events", events.write(), pygit2.enums.FileMode.TREE)
        entry.insert("answers", answers.write(), pygit2.enums.FileMode.TREE)
        shards.setdefault(fp[:2], r.TreeBuilder()).insert(fp, entry.write(), pygit2.enums.FileMode.TREE)
    root = r.TreeBuilder()
    for name, tb in shards.items():
        root.insert(name, tb.write(), pygit2.enums.FileMode.TREE)
    commit = store.commit(root.write(), [], "bench fill\n")
    store.update_refs([RefUpdate(REPLAYS_REF, None, commit)])


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    from git_genjob.replay.cache import Cache, call, request_doc
    from git_genjob.storage.store import Store

    repo = make_repo(1)
    t = time.perf_counter()
    fill(repo, n)
    print(f"filled {n} fingerprints in {time.perf_counter() - t:.1f} s")
    cache = Cache(Store.open(repo))
    doc = request_doc("http://127.0.0.1:9/v1", "m", {}, "Write hello", None)
    call(cache, doc, lambda p: "hello\n")  # record the one we will hit
    times = []
    for _ in range(50):
        t = time.perf_counter()
        res = call(cache, doc, lambda p: (_ for _ in ()).throw(AssertionError("a hit must not send")))
        times.append(time.perf_counter() - t)
        assert res.source == "replay"
    print(f"in-process hit: median {statistics.median(times) * 1000:.2f} ms")
    with open(os.path.join(repo, "p.txt"), "w") as fh:
        fh.write("Write hello")
    cli = []
    for _ in range(10):
        t = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "git_genjob",
                "ask",
                "--endpoint",
                "openai:http://127.0.0.1:9/v1",  # the dialect request_doc above fingerprints
                "--model",
                "m",
                "--prompt-file",
                "p.txt",
                "--out-file",
                "o.txt",
                "--mode",
                "offline",
            ],
            cwd=repo,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        cli.append(time.perf_counter() - t)
    print(f"CLI hit (git genjob ask --mode offline, whole process): median {statistics.median(cli) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
