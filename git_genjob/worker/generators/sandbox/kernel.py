"""The libc handle and raw system calls the sandbox makes (ctypes), and the prctl options
more than one of its modules sets."""

from __future__ import annotations

import ctypes
import functools
import os

PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38


@functools.cache
def load_libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def syscall(*args: object) -> int:
    result = int(load_libc().syscall(*args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result
