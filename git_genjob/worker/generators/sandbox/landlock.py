"""The Landlock launch: the kernel's path-based access control over the real file system (and
TCP, ABI 4+), applied to the generator before it starts, with PID, network and IPC namespaces
where the worker may make them; the probes of what this kernel and user allow."""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import resource
import shutil
import stat
import sys
import threading
from collections.abc import Callable
from typing import cast

from git_genjob.worker.generators.sandbox.identity import become, become_pid_one, read_last_cap
from git_genjob.worker.generators.sandbox.kernel import PR_SET_NO_NEW_PRIVS, load_libc, syscall
from git_genjob.worker.generators.sandbox.limits import prlimit_args, prlimit_exe, set_rlimits
from git_genjob.worker.generators.sandbox.options import Attempt, Launch, SandboxOptions, View, record
from git_genjob.worker.generators.sandbox.paths import DEVICES, SYSTEM_DIRS, etc_paths
from git_genjob.worker.generators.sandbox.seccomp import seccomp_applier

SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = (
    444,
    445,
    446,
)

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = (
    0x00020000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
)


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none: kernel before 5.13 or Landlock not enabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except OSError:
        return 0


@functools.cache
def userns_works() -> bool:
    """Whether this (non-root) user may create user, PID and network namespaces."""
    if os.geteuid() == 0:
        return True
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ok = load_libc().unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC) == 0
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


# Landlock rights (include/uapi/linux/landlock.h), by the ABI that added them.
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3

FS_REMOVE_DIR, FS_REMOVE_FILE, FS_MAKE_CHAR, FS_MAKE_DIR = (
    1 << 4,
    1 << 5,
    1 << 6,
    1 << 7,
)

FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK, FS_MAKE_SYM = (
    1 << 8,
    1 << 9,
    1 << 10,
    1 << 11,
    1 << 12,
)

FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15

NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

RO = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR

RW = (1 << 16) - 1 & ~(FS_MAKE_CHAR | FS_MAKE_BLOCK)

DEV = FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV

RULE_PATH_BENEATH = 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _handled_fs(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def landlock_ruleset(rules: list[tuple[str, int]], deny_tcp: bool) -> int:
    """A Landlock ruleset fd allowing exactly `rules` (path, rights) and, with `deny_tcp`, no
    TCP bind or connect; abstract Unix sockets and signals are scoped to the sandbox."""
    abi = landlock_abi()
    handled = _handled_fs(abi)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if deny_tcp and abi >= 4 else 0, 0)
    size = 8
    if abi >= 4:
        size = 16
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
    fd = syscall(
        SYS_LANDLOCK_CREATE_RULESET,
        ctypes.byref(attr),
        ctypes.c_size_t(size),
        ctypes.c_uint32(0),
    )
    try:
        for path, rights in rules:
            _add_rule(fd, path, rights, handled)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _add_rule(fd: int, path: str, rights: int, handled: int) -> None:
    """Allow `rights` (of those handled; a file's only) beneath `path`, if it is there."""
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # an optional system path that is not there
    try:
        if not stat.S_ISDIR(os.fstat(target).st_mode):  # fstat of an O_PATH fd: Linux 3.6+
            rights &= FILE_RIGHTS
        beneath = _PathBeneath(rights & handled, target)
        syscall(
            SYS_LANDLOCK_ADD_RULE,
            fd,
            ctypes.c_int(RULE_PATH_BENEATH),
            ctypes.byref(beneath),
            0,
        )
    finally:
        os.close(target)


def landlock_launch(opts: SandboxOptions, view: View) -> Launch:
    """The launch of `argv` under a Landlock ruleset allowing what the view shows, in the
    namespaces this worker may make: from a confined thread of a root worker, else from the
    confined forked child."""
    argv, attempt, user, limits, relay = view.argv, view.attempt, view.user, view.limits, view.relay
    rules = _rules(opts, attempt, view.ro, view.rw)
    flags = _namespaces(opts.allow_net)
    # With a network namespace of its own (--allow-host needs one) the relay binds and connects on
    # its loopback: Landlock's TCP rule would only stop it; the namespace already holds nothing else.
    ruleset = landlock_ruleset(rules, deny_tcp=not opts.allow_net and not (relay and flags & CLONE_NEWNET))
    rec = record("landlock", _network(opts, flags), opts, view.auto, opts.limits)
    prlimit = prlimit_exe()
    setid = SETID_SYSCALLS.get(platform.machine())
    restrict = _restrictor(ruleset, seccomp_applier())
    if user is not None and flags and not flags & CLONE_NEWUSER and prlimit is not None and setid is not None:
        # A root worker confines one thread of its own and starts the generator from it (vfork,
        # no fork of the worker): namespaces for its children, `nobody`, no_new_privs and the
        # Landlock domain are all per thread; the limits (per process) are set by prlimit.
        # The generator is the first process of its PID namespace and, in a session of its
        # own, cannot leave the process group the worker's reaper kills.
        return Launch(
            [*prlimit_args(prlimit, limits), *argv],
            {"TMPDIR": attempt.tmp},
            None,
            rec,
            lambda: os.close(ruleset),
            tied=True,
            spawner=_in_thread(_thread_confiner(flags, relay, user, setid, restrict)),
        )
    return _child_launch(view, flags, rec, ruleset, restrict)


def _child_launch(view: View, flags: int, rec: dict[str, object], ruleset: int, restrict: Callable[[], None]) -> Launch:
    """The launch whose Python child is confined before it execs the generator."""
    argv, attempt, user, limits, relay = view.argv, view.attempt, view.user, view.limits, view.relay
    # The generator must be the first process of its PID namespace: util-linux `unshare --fork`
    # (no namespace of its own to make) is the small process that forks it and waits; a fork in
    # the Python child would copy the worker's page tables a second time and tear them down at
    # the end, a cost that grows with the worker's memory. It runs as the generator, confined.
    forker = unshare_exe() if flags & CLONE_NEWPID else None
    if forker is not None:
        argv = [forker, "--fork", "--kill-child", "--", *argv]
        if user is not None:  # it counts as one of `nobody`'s processes (the Python one was root's)
            limits = [(w, v + 1 if w == resource.RLIMIT_NPROC else v) for w, v in limits]
    preexec = _child_confiner(flags, relay, forker is None, user, limits, restrict)
    return Launch(argv, {"TMPDIR": attempt.tmp}, preexec, rec, lambda: os.close(ruleset))


def _rules(opts: SandboxOptions, attempt: Attempt, ro: list[str], rw: list[str]) -> list[tuple[str, int]]:
    """What the ruleset allows: the system, /etc's files and /proc read-only; the devices and
    the attempt's logs as files; the job files and `ro` read-only; the scratch tree, HOME, /tmp
    and `rw` read-write; with --allow-net, resolv.conf's target."""
    rules = [(d, RO) for d in SYSTEM_DIRS] + [(p, RO) for p in etc_paths()] + [("/proc", RO)]
    rules += [(d, DEV) for d in DEVICES] + [(p, DEV) for p in (attempt.log, attempt.err_log) if p]
    rules += [(p, RO) for p in [*attempt.job_files, *ro]]
    rules += [(p, RW) for p in [attempt.scratch, attempt.home, attempt.tmp, *rw]]
    if opts.allow_net:
        resolv = os.path.realpath("/etc/resolv.conf")
        rules.append((resolv, RO))
    return rules


def _namespaces(allow_net: bool) -> int:
    """The CLONE_NEW* flags of the generator's namespaces: none where this user may not make
    them, else PID and IPC, network unless --allow-net, and a user namespace unless root."""
    if not userns_works():
        return 0
    flags = CLONE_NEWPID | CLONE_NEWIPC
    if not allow_net:
        flags |= CLONE_NEWNET
    if os.geteuid() != 0:
        flags |= CLONE_NEWUSER
    return flags


def _network(opts: SandboxOptions, flags: int) -> str:
    """The receipt's `network`: all, hosts (through the proxy), none (a namespace of its own)
    or tcp-denied (Landlock's TCP rule alone)."""
    if opts.allow_net:
        return "all"
    if opts.allow_hosts:
        return "hosts"
    return "none" if flags & CLONE_NEWNET else "tcp-denied"


def _restrictor(ruleset: int, seccomp: Callable[[], None]) -> Callable[[], None]:
    """The last steps of either launch, on the calling thread: no_new_privs, the Landlock
    domain of `ruleset`, the seccomp filter."""
    libc = load_libc()

    def restrict() -> None:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
        seccomp()

    return restrict


def _thread_confiner(
    flags: int,
    relay: bool,
    user: tuple[int, int],
    setid: tuple[int, int, int],
    restrict: Callable[[], None],
) -> Callable[[], None]:
    """What a root worker's launching thread does to itself before it starts the generator:
    the namespaces, the loopback for the relay, `nobody` (by system calls, this thread only),
    then `restrict`."""
    libc = load_libc()
    last_cap = read_last_cap()

    def confine_thread() -> None:
        if libc.unshare(flags) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        if flags & CLONE_NEWNET and relay:
            _loopback_up()
        become(user, last_cap, setid)
        restrict()

    return confine_thread


def _child_confiner(
    flags: int,
    relay: bool,
    pid_one: bool,
    user: tuple[int, int] | None,
    limits: list[tuple[int, int]],
    restrict: Callable[[], None],
) -> Callable[[], None]:
    """The forked child's preexec: the namespaces (and, with `pid_one`, the fork that makes the
    generator the first process of its PID namespace), the limits, `nobody` for a root worker,
    then `restrict`."""
    libc = load_libc()
    last_cap = read_last_cap()
    uid, gid = os.getuid(), os.getgid()

    def enter_namespaces() -> None:
        if libc.unshare(flags) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        if flags & CLONE_NEWUSER:
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{uid} {uid} 1"),
                ("gid_map", f"{gid} {gid} 1"),
            ):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
        if flags & CLONE_NEWNET and relay:
            _loopback_up()
        if pid_one:
            become_pid_one()

    def preexec() -> None:
        if flags:
            enter_namespaces()
        set_rlimits(limits)
        if user is not None:
            become(user, last_cap)
        restrict()

    return preexec


# setgroups, setresgid, setresuid by architecture: glibc's functions change every thread of the
# process (POSIX), the system calls only the calling one.
SETID_SYSCALLS = {"x86_64": (116, 119, 117), "aarch64": (159, 149, 147)}


def _in_thread(
    confine_thread: Callable[[], None],
) -> Callable[[Callable[[], object]], object]:
    """Runs `confine_thread` then the caller's Popen in a new thread of the worker, which ends
    with it: what the thread gave up is never used again."""

    def spawn(popen: Callable[[], object]) -> object:
        box: dict[str, object] = {}

        def run() -> None:
            try:
                confine_thread()
                box["proc"] = popen()
            except BaseException as exc:
                box["error"] = exc

        thread = threading.Thread(target=run, name="genjob-sandbox-launch")
        thread.start()
        thread.join()
        if "error" in box:
            raise cast(BaseException, box["error"])
        return box["proc"]

    return spawn


@functools.cache
def unshare_exe() -> str | None:
    return shutil.which("unshare")


def _loopback_up() -> None:
    """`ip link set lo up` in the new network namespace (bubblewrap does the same)."""
    import fcntl
    import socket
    import struct

    siocsifflags, iff_up, iff_loopback, iff_running = 0x8914, 0x1, 0x8, 0x40
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(
            s,
            siocsifflags,
            struct.pack("16sH22x", b"lo", iff_up | iff_loopback | iff_running),
        )
