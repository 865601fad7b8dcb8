"""The resource limits (setrlimit) that bound a generator's processes, memory, file size and CPU
time, set in the child or by util-linux's prlimit before it execs."""

from __future__ import annotations

import functools
import os
import resource
import shutil

from git_genjob.documents.config import SandboxLimits


def tasks_of(uid: int) -> int:
    """Threads of `uid` running now: RLIMIT_NPROC counts every task of the real user."""
    n = 0
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                n += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return n


def rlimits(limits: SandboxLimits, uid: int) -> list[tuple[int, int]]:
    return [
        (resource.RLIMIT_NPROC, limits.procs + tasks_of(uid)),
        (resource.RLIMIT_DATA, limits.memory),
        (resource.RLIMIT_FSIZE, limits.file_size),
        (resource.RLIMIT_CPU, limits.cpu),
        (resource.RLIMIT_CORE, 0),
    ]


def set_rlimits(values: list[tuple[int, int]]) -> None:
    for which, value in values:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


@functools.cache
def prlimit_exe() -> str | None:
    return shutil.which("prlimit")


PRLIMIT_NAMES = {
    resource.RLIMIT_NPROC: "nproc",
    resource.RLIMIT_DATA: "data",
    resource.RLIMIT_FSIZE: "fsize",
    resource.RLIMIT_CPU: "cpu",
    resource.RLIMIT_CORE: "core",
}


def prlimit_args(exe: str, values: list[tuple[int, int]]) -> list[str]:
    """`prlimit --nproc=N:N ... --`: the limits `set_rlimits` would set, set by util-linux's
    prlimit, which then execs bubblewrap (same process, no fork)."""
    out = [exe]
    for which, value in values:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        out.append(f"--{PRLIMIT_NAMES[which]}={value}:{value}")
    return [*out, "--"]
