"""Where people wait (issue 24): a `git commit` and a `git push` with genjob's hooks installed,
each beside the same git command without hooks, measured interleaved in the same run.

Usage: python bench/bench_hooks.py [N]   (default 20 rounds; bench/run --only hooks runs it too)

Each round makes one commit in each repository (no hooks; hooks with no live job; hooks with 10
live jobs on other paths) and one push of a plain commit to a bare remote (no hooks; hooks), so
noise hits every column alike. The hooks are the scripts `init --hooks` writes, run by git.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import make_repo  # noqa: E402


def child_env() -> dict[str, str]:
    """The user's environment: an installed package has its bytecode compiled (pip does it),
    so a variable that stops Python writing it would charge every hook a compile."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _git(repo: str, *args: str) -> None:
    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, env=child_env())


def _genjob(repo: str, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "git_genjob", *args], cwd=repo, check=True, capture_output=True, env=child_env()
    )


CPU: list[float] = []  # CPU seconds (user + system, the command and its children) of each _timed run


def _timed(argv: list[str], cwd: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True, env=child_env())
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return elapsed


def _commit(repo: str, i: int) -> float:
    with open(os.path.join(repo, "f0.py"), "a") as fh:
        fh.write(f"# {i}\n")
    _git(repo, "add", "f0.py")
    return _timed(["git", "commit", "-q", "-m", f"hand edit {i}"], repo)


def _push(repo: str, i: int) -> float:
    with open(os.path.join(repo, "f1.py"), "a") as fh:
        fh.write(f"# {i}\n")
    _git(repo, "commit", "-q", "--no-verify", "-am", f"pushed {i}")
    return _timed(["git", "push", "-q", "origin", "main"], repo)


def _with_remote(repo: str) -> str:
    bare = tempfile.mkdtemp(prefix="genjob-bench-remote-")
    _git(bare, "init", "-q", "--bare")
    _git(repo, "remote", "add", "origin", bare)
    _git(repo, "push", "-q", "origin", "main")
    return bare


def _hooked(live: int) -> str:
    repo = make_repo()
    _genjob(repo, "init", "--hooks")
    _git(repo, "add", ".genjob")
    _git(repo, "commit", "-q", "--no-verify", "-m", "init")
    for j in range(live):
        _genjob(repo, "submit", "-m", f"held {j}", f"f{j + 5}.py")
    return repo


def measure(rounds: int) -> dict[str, float]:
    """Medians in ms: commit with no hooks / hooks and 0 live jobs / hooks and 10 live jobs,
    push with no hooks / hooks (no genjob commit pushed); `<name>_cpu`: the median CPU time
    (less moved than wall time by other load on a shared machine)."""
    plain, hooked0, hooked10 = make_repo(), _hooked(0), _hooked(10)
    for repo in (plain, hooked0, hooked10):
        _with_remote(repo)
    for i in range(2):  # warm-up: page cache, bytecode, the hooks' memo
        for repo in (plain, hooked0, hooked10):
            _commit(repo, -1 - i)
            _push(repo, -1 - i)
    names = ("commit", "commit_hooks0", "commit_hooks10", "push", "push_hooks")
    cols: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    for i in range(rounds):
        for name, run, repo in (
            ("commit", _commit, plain),
            ("commit_hooks0", _commit, hooked0),
            ("commit_hooks10", _commit, hooked10),
            ("push", _push, plain),
            ("push_hooks", _push, hooked0),
        ):
            cols[name].append(run(repo, i))
            cpu[name].append(CPU[-1])
    out = {k: statistics.median(v) * 1000 for k, v in cols.items()}
    out.update({f"{k}_cpu": statistics.median(v) * 1000 for k, v in cpu.items()})
    return out


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    m = measure(rounds)
    print(f"git commit, no hooks            {m['commit']:6.1f} ms")
    print(f"git commit, hooks, 0 live jobs  {m['commit_hooks0']:6.1f} ms  (+{m['commit_hooks0'] - m['commit']:.1f})")
    print(f"git commit, hooks, 10 live jobs {m['commit_hooks10']:6.1f} ms  (+{m['commit_hooks10'] - m['commit']:.1f})")
    print(f"git push, no hooks              {m['push']:6.1f} ms")
    print(f"git push, hooks                 {m['push_hooks']:6.1f} ms  (+{m['push_hooks'] - m['push']:.1f})")
    print("CPU ms: " + ", ".join(f"{k} {v:.1f}" for k, v in m.items() if k.endswith("_cpu")))


if __name__ == "__main__":
    main()
