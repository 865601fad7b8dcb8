"""Scratch directories named by their process, so the next run cleans up after a SIGKILL."""

from __future__ import annotations

import os
import shutil
import tempfile

from git_genjob.storage.locks import running

SCRATCH_PREFIX = "genjob-scratch-"


def scratch_dir() -> str:
    """A private scratch directory named by this process, so a later worker can clean up after a kill."""
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")


def clean_stale_scratch() -> list[str]:
    """Remove scratch directories of workers that are no longer running (a SIGKILL skips `finally`)."""
    root = tempfile.gettempdir()
    removed = []
    for name in os.listdir(root):
        if not name.startswith(SCRATCH_PREFIX):
            continue
        pid = name[len(SCRATCH_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or running(int(pid)):
            continue
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path) and os.stat(path).st_uid == os.getuid():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
