"""The bubblewrap launch: the view as a new mount namespace built from bind mounts (the system,
/etc, the attempt's directories, the owner's paths), new PID, network and IPC namespaces,
`nobody` for a root worker."""

from __future__ import annotations

import os
import shutil
import stat

from git_genjob.worker.generators.sandbox.limits import prlimit_args, prlimit_exe, set_rlimits
from git_genjob.worker.generators.sandbox.options import Attempt, Launch, SandboxOptions, View, record
from git_genjob.worker.generators.sandbox.paths import SYSTEM_DIRS, ancestors, etc_paths, in_system, inside
from git_genjob.worker.generators.sandbox.seccomp import seccomp_fd


def unshare_args(allow_net: bool) -> list[str]:
    args = ["--unshare-pid", "--unshare-ipc"]
    if os.geteuid() != 0:
        args.append("--unshare-user")
    if not allow_net:
        args.append("--unshare-net")
    return args


def bwrap_launch(opts: SandboxOptions, view: View) -> Launch:
    """The launch of `argv` in bubblewrap's view: the system, /etc, the attempt's directories
    and the owner's paths, the seccomp filter, then `nobody` for a root worker."""
    argv, attempt, ro, rw, user = view.argv, view.attempt, view.ro, view.rw, view.user
    exe = shutil.which("bwrap") or "bwrap"
    # A read-write path inside /etc would turn read-only with it: then every file is bound, as before.
    copy_etc = not any(inside(p, "/etc") for p in rw)
    etc, fds = _bwrap_etc(opts.allow_net, copy_etc)
    fds.append(seccomp_fd())
    owner, shown = _owner_binds(ro, rw)
    args = [
        *[exe, "--die-with-parent", "--new-session", *unshare_args(opts.allow_net)],
        *_system_binds(),
        *etc,
        *["--seccomp", str(fds[-1])],
        *["--dev", "/dev", "--proc", "/proc", "--bind", attempt.tmp, "/tmp"],
        *_mount_points(attempt, shown),
        *_attempt_binds(attempt),
        *owner,
    ]
    if copy_etc and user is None:
        # Last (binds inside /etc need their mount points made first). In a user namespace the
        # copies belong to the generator's user; for a root worker they are root's and the
        # generator is `nobody` without capabilities, as for the rest of bubblewrap's root tmpfs.
        args += ["--remount-ro", "/etc"]
    args += ["--chdir", attempt.scratch, *_as_user(user)]
    network = "all" if opts.allow_net else "hosts" if opts.allow_hosts else "none"
    return _limited([*args, *argv], fds, view.limits, record("bwrap", network, opts, view.auto, opts.limits))


def _system_binds() -> list[str]:
    """The system directories, read-only (a symlink such as /lib -> usr/lib made as one)."""
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


def _owner_binds(ro: list[str], rw: list[str]) -> tuple[list[str], list[str]]:
    """The paths shown read-only (`ro`) and read-write (`rw`), shallowest first, a read-only one
    already visible under another left out; a symlink bound at its target and shown at its own
    path as a symlink. Returns the arguments and the paths shown."""
    binds, links = _binds_and_links(ro, rw)
    shown: list[str] = []
    args: list[str] = []
    for flag, p in binds:
        if flag == "--ro-bind" and any(inside(p, q) for q in shown):
            continue  # already visible read-only
        shown.append(p)
        args += [flag, p, p]
    return args + _symlinks(links, shown), shown


def _symlinks(links: list[tuple[str, str]], shown: list[str]) -> list[str]:
    """Each (target, path) symlink made at its path unless that is visible already (added to `shown`)."""
    args: list[str] = []
    for target, p in links:
        if not any(inside(p, q) for q in shown):
            args += ["--symlink", target, p]
            shown.append(p)
    return args


def _binds_and_links(ro: list[str], rw: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The (flag, path) binds of `ro` and `rw`, shallowest first, a symlink's at its target; and
    the (target, path) of each symlink."""
    binds: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    for flag, p in [("--ro-bind", p) for p in ro] + [("--bind", p) for p in rw]:
        if os.path.islink(p):  # bound at its target, shown at its own path as a symlink
            links.append((os.path.realpath(p), p))
            p = os.path.realpath(p)
        binds.append((flag, p))
    binds.sort(key=lambda b: b[1].count("/"))
    return binds, links


def _mount_points(attempt: Attempt, shown: list[str]) -> list[str]:
    """The directories above what is bound (and those a `..` in the program path walks
    through), made 0755: bwrap would make them 0700, unreadable to nobody."""
    dests = [attempt.home, attempt.scratch, *attempt.job_files, *shown]
    parents = {a for d in [*dests, *attempt.walked] for a in [*ancestors(d), d]} - {
        "/",
        "/tmp",
        *dests,
    }
    args: list[str] = []
    for d in sorted(parents, key=lambda a: (a.count("/"), a)):
        if not in_system(d) and not any(inside(d, q) for q in shown):
            args += ["--perms", "0755", "--dir", d]
    return args


def _attempt_binds(attempt: Attempt) -> list[str]:
    """The attempt's HOME and scratch tree read-write, its job files read-only."""
    args: list[str] = []
    for p in (attempt.home, attempt.scratch):
        args += ["--bind", p, p]
    for p in attempt.job_files:
        args += ["--ro-bind", p, p]
    return args


def _as_user(user: tuple[int, int] | None) -> list[str]:
    """The end of bwrap's options: for a root worker, setpriv making the generator `user`
    without groups, capabilities or new privileges."""
    if user is None:
        return ["--"]
    uid, gid = user
    setpriv = shutil.which("setpriv") or "setpriv"
    return [
        "--",
        setpriv,
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
    ]


def _limited(
    argv: list[str],
    fds: list[int],
    limits: list[tuple[int, int]],
    rec: dict[str, object],
) -> Launch:
    """The launch of bwrap's `argv` under the resource limits: set by util-linux's prlimit,
    which then execs bubblewrap, or else in the forked child."""
    prlimit = prlimit_exe()

    def close() -> None:
        for fd in fds:
            os.close(fd)

    if prlimit is None:  # no util-linux prlimit: the limits are set in the forked child

        def preexec() -> None:
            set_rlimits(limits)

        return Launch(argv, {"TMPDIR": "/tmp"}, preexec, rec, close, fds=tuple(fds))
    argv = [*prlimit_args(prlimit, limits), *argv]
    return Launch(argv, {"TMPDIR": "/tmp"}, None, rec, close, fds=tuple(fds), tied=True)


def _bwrap_etc(allow_net: bool, copy: bool) -> tuple[list[str], list[int]]:
    """The `/etc` of the view. With `copy`: a tmpfs (made read-only once every bind is in place)
    holding a copy of each world-readable regular file of root's that `ETC` names (`--file FD`:
    no mount, where each `--ro-bind` costs bubblewrap a mount and a pass over the mount table:
    4 to 5 ms for the list); any other file bound read-only, so it keeps its owner and mode.
    Directories are bound read-only, symlinks made as symlinks. Returns the arguments and the
    descriptors the child inherits."""
    # bubblewrap makes the directories it needs 0700, unreadable to a root worker's `nobody`
    # (before this, its whole /etc was), so /etc and /etc/ssl, /etc/pki... are made 0755 first.
    args = ["--tmpfs", "/etc"] if copy else ["--perms", "0755", "--dir", "/etc"]
    made = {"/etc"}
    fds: list[int] = []
    try:
        for p in etc_paths():
            args += _etc_dirs(p, made)
            args += _etc_file(p, allow_net, copy, fds)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return args, fds


def _etc_dirs(p: str, made: set[str]) -> list[str]:
    """The directories of /etc above `p` not made yet (added to `made`), each made 0755."""
    args: list[str] = []
    for d in reversed(ancestors(p)):
        if inside(d, "/etc") and d not in made:
            made.add(d)
            args += ["--perms", "0755", "--dir", d]
    return args


def _etc_file(p: str, allow_net: bool, copy: bool, fds: list[int]) -> list[str]:
    """How one path of `ETC` is shown: a symlink as a symlink (resolv.conf's target is bound
    with --allow-net); with `copy`, a world-readable regular file of root's as a copy from an
    open descriptor (appended to `fds`); anything else bound read-only."""
    if os.path.islink(p) and not (allow_net and p == "/etc/resolv.conf"):
        return ["--symlink", os.readlink(p), p]
    if copy:
        copied = _copied_etc_file(p, fds)
        if copied is not None:
            return copied
    return ["--ro-bind", p, p] if os.path.exists(p) else []


def _copied_etc_file(p: str, fds: list[int]) -> list[str] | None:
    """A world-readable regular file of root's as a copy from an open descriptor (appended to
    `fds`), anything else open as a read-only bind; None when it cannot be opened."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_uid == 0 and st.st_mode & 0o004:
        fds.append(fd)
        return [
            "--perms",
            f"{stat.S_IMODE(st.st_mode) & 0o755:04o}",
            "--file",
            str(fd),
            p,
        ]
    os.close(fd)
    return ["--ro-bind", p, p]
