"""Who the generator runs as: a root worker's generator is `nobody` (root's processes are exempt
from the process limit), its directories handed over to it; under Landlock with CAP_DAC_OVERRIDE
alone, and as the first process of its own PID namespace."""

from __future__ import annotations

import ctypes
import os
import pwd
import signal

from git_genjob.worker.generators.sandbox.kernel import PR_SET_PDEATHSIG, load_libc
from git_genjob.worker.generators.sandbox.options import Attempt


def sandbox_user() -> tuple[int, int] | None:
    """(uid, gid) the generator runs as when the worker is root; None: the worker's own."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam("nobody")
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        return 65534, 65534


def hand_over(attempt: Attempt, user: tuple[int, int] | None) -> None:
    """The generator's own directories belong to the user it runs as."""
    if user is None:
        return
    uid, gid = user
    os.chmod(os.path.dirname(attempt.scratch), 0o711)  # traversable, not listable
    for top in (attempt.scratch, attempt.home, attempt.tmp):
        os.chown(top, uid, gid)
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


PR_SET_KEEPCAPS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 8, 24, 47, 2

CAP_DAC_OVERRIDE = 1

LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def read_last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 40


def become(user: tuple[int, int], last_cap: int, setid: tuple[int, int, int] | None = None) -> None:
    """Root's Landlock child becomes `nobody` with one capability, CAP_DAC_OVERRIDE (ambient, so
    it survives exec): the process limit binds (root's processes are exempt from it) and the
    paths Landlock allows stay reachable through root's 0700 directories (pyenv under /root, a
    test's tmp_path). Landlock, not file modes, decides what it may touch. With `setid` (the
    setgroups, setresgid, setresuid system call numbers) only the calling thread changes: glibc's
    functions change every thread of the process (POSIX)."""
    libc = load_libc()
    for cap in range(last_cap + 1):
        if cap != CAP_DAC_OVERRIDE:
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    if libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_KEEPCAPS)")
    _set_ids(libc, user, setid)
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    one = 1 << CAP_DAC_OVERRIDE
    data = (_CapData * 2)(_CapData(one, one, one), _CapData(0, 0, 0))
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_OVERRIDE, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAP_AMBIENT_RAISE)")


def _set_ids(libc: ctypes.CDLL, user: tuple[int, int], setid: tuple[int, int, int] | None) -> None:
    """No groups, then `user`'s gid and uid: through glibc (every thread) or, with `setid`, by
    system call (the calling thread only)."""
    if setid is None:
        os.setgroups([])
        os.setresgid(user[1], user[1], user[1])
        os.setresuid(user[0], user[0], user[0])
        return
    nr_setgroups, nr_setresgid, nr_setresuid = setid
    if libc.syscall(nr_setgroups, 0, None) != 0:
        raise OSError(ctypes.get_errno(), "setgroups")
    if libc.syscall(nr_setresgid, user[1], user[1], user[1]) != 0:
        raise OSError(ctypes.get_errno(), "setresgid")
    if libc.syscall(nr_setresuid, user[0], user[0], user[0]) != 0:
        raise OSError(ctypes.get_errno(), "setresuid")


def become_pid_one() -> None:
    """In the child, after unshare(CLONE_NEWPID): fork, so that the generator is the first process
    of the new PID namespace (when it ends, the kernel kills everything it left). The parent stays
    behind only to wait for it and exit as it did; it closes every other descriptor, so the
    worker's Popen sees the exec of the generator itself."""
    pid = os.fork()
    if pid == 0:
        load_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the worker's reaper kills the group too
        return
    os.closerange(3, 1 << 20)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
