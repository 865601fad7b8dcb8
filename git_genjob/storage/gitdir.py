"""Finding the repository and the live job keys without libgit2 (the hooks' fast path)."""

from __future__ import annotations

import os

JOBS_PREFIX = "refs/genjob/jobs/"


def common_dir(start: str | None = None) -> str | None:
    """The common git directory around `start` (honours GIT_DIR / GIT_COMMON_DIR as git sets them)."""
    env_common = os.environ.get("GIT_COMMON_DIR")
    if env_common:
        return os.path.abspath(env_common)
    gitdir = os.environ.get("GIT_DIR")
    if gitdir:
        return resolve_common(os.path.abspath(gitdir))
    path = os.path.abspath(start or os.getcwd())
    while True:
        dotgit = os.path.join(path, ".git")
        if os.path.isdir(dotgit):
            return resolve_common(dotgit)
        if os.path.isfile(dotgit):
            with open(dotgit, encoding="utf-8") as fh:
                line = fh.read().strip()
            if line.startswith("gitdir:"):
                return resolve_common(os.path.normpath(os.path.join(path, line[len("gitdir:") :].strip())))
        if os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "refs")):
            return path  # a bare repository
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def resolve_common(gitdir: str) -> str:
    """The common directory of a git directory: itself, or what its `commondir` file names (a
    linked worktree's). The one place this is resolved."""
    common = os.path.join(gitdir, "commondir")
    if os.path.exists(common):
        with open(common, encoding="utf-8") as fh:
            return os.path.normpath(os.path.join(gitdir, fh.read().strip()))
    return gitdir


def live_keys(common: str) -> list[str]:
    """Keys of the live job refs: a directory listing plus packed-refs, no ref file reads."""
    keys: set[str] = set()
    try:
        loose = os.path.join(common, "refs", "genjob", "jobs")
        keys |= {e.name for e in os.scandir(loose) if e.is_file() and not e.name.endswith(".lock")}
    except FileNotFoundError:
        pass
    try:
        with open(os.path.join(common, "packed-refs"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                name = line.rstrip("\n").partition(" ")[2]
                if name.startswith(JOBS_PREFIX):
                    keys.add(name[len(JOBS_PREFIX) :])
    except FileNotFoundError:
        pass
    return sorted(keys)


def parse_trailers(message: str) -> dict[str, str]:
    """The trailer block at the end of a commit message ({key: first value})."""
    out: dict[str, str] = {}
    for line in message.strip().splitlines()[::-1]:
        if not line.strip():
            break
        if ": " in line:
            k, v = line.split(": ", 1)
            out.setdefault(k.strip(), v.strip())
    return out
