"""The process sandbox every `exec:` generator runs in: bubblewrap, else Landlock, else refused.

A generator is an agent CLI following an instruction that may come from a hostile remote. In
the sandbox it sees the scratch tree (read-write), the job files (read-only), the system
(`/usr`, `/bin`, `/lib*`, the files of `/etc` that tools read, a few devices), an empty HOME and
a private /tmp (both inside the attempt's directory, removed with it), the program it was
started as, and what the worker's owner adds with `--sandbox-ro` / `--sandbox-rw`. Nothing
else: not the repository, not the worker's key, not the user's HOME. Its network is off unless
`--allow-net`, or `--allow-host` (only through the worker's filtering proxy). Resource limits
(setrlimit) bound its processes, memory, file size and CPU time. A worker running as root
runs its generator as `nobody`: root's processes are exempt from the process limit.

Mechanisms, in order of preference:

- `bwrap` (bubblewrap, packaged by every major distribution): the view is a new mount
  namespace built from bind mounts, with new PID, network and IPC namespaces. When the
  generator's first process ends, the PID namespace ends, and everything it started (even
  with `setsid`) dies with it. `--die-with-parent` ties it to the worker.
- `landlock` (Linux 5.13+, no dependency): the kernel's own path-based access control over
  the real file system, applied to the generator before it starts; TCP bind and connect are
  denied by Landlock itself (ABI 4+); abstract Unix sockets and signals outside the sandbox
  are scoped off (ABI 6+). Where the worker may create namespaces (root, or unprivileged user
  namespaces), the generator also gets its own PID, network and IPC namespaces. A root worker
  confines one thread of its own and starts the generator from it (no fork of the worker);
  a non-root worker confines the forked child.

Neither: the worker refuses to run an exec generator, naming both and `--no-sandbox`.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import pwd
import re
import resource
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar, cast

from git_genjob.documents.config import SandboxConfig, SandboxLimits
from git_genjob.documents.errors import BadInput
from git_genjob.worker.generators.shell import ASSIGNMENT, SH_WORDS

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Of /etc, what programs and their libraries read; never shadow, sudoers, ssh host keys,
# ssl private keys or network credentials. More with --sandbox-ro /etc/NAME.
ETC = (
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "hostname",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    "networks",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/ca-trust",
    "crypto-policies",
    "alternatives",
    "mime.types",
    "locale.alias",
    "locale.conf",
    "inputrc",
    "terminfo",
    "magic",
    "os-release",
    "debian_version",
    "login.defs",
    "shells",
    "python3",
    f"python3.{sys.version_info.minor}",
    "perl",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
P = TypeVar("P")
REFUSAL_FIX = (
    "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap), or use a Linux kernel "
    "with Landlock (5.13 or later); or, knowing the generator can then read and write what this user "
    "can, run it unconfined with work --no-sandbox (each receipt records it); each probe: git genjob doctor"
)


@dataclass(frozen=True)
class SandboxOptions:
    """What the worker's owner asked for: `[sandbox]` of `.genjob/config.toml` and `work`'s options."""

    mechanism: str = "auto"  # auto | bwrap | landlock | none (work --no-sandbox)
    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    allow_net: bool = False
    allow_hosts: tuple[str, ...] = ()
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    # What no path shown for the program may hold: the repository and the worker's key (a venv
    # made beside the repository would otherwise show both with its prefix).
    guarded: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg: SandboxConfig) -> SandboxOptions:
        return cls(cfg.mechanism, cfg.ro, cfg.rw, cfg.allow_net, cfg.allow_hosts, cfg.limits)


def choose(opts: SandboxOptions) -> str:
    """The mechanism this worker uses (`bwrap`, `landlock` or `none`), or BadInput (exit 2)
    before any job is claimed. GENJOB_SANDBOX=bwrap|landlock picks one, as `mechanism` does."""
    if opts.mechanism == "none":
        return "none"
    want = os.environ.get("GENJOB_SANDBOX") or opts.mechanism
    if want not in ("auto", "bwrap", "landlock"):
        raise BadInput(f"GENJOB_SANDBOX={want!r}: use bwrap or landlock", "or work --no-sandbox")
    if not sys.platform.startswith("linux"):
        raise BadInput(
            f"exec generators run in a process sandbox, and none is available on {sys.platform} yet",
            "run it unconfined with work --no-sandbox (each receipt records it)",
        )
    if opts.allow_hosts:
        from git_genjob.worker.generators.proxy import parse_hosts

        parse_hosts(opts.allow_hosts)
        if opts.allow_net:
            raise BadInput("--allow-host and --allow-net: the second already opens every host", "give one of them")
    if want in ("auto", "bwrap"):
        why = bwrap_problem()
        if why is None:
            return "bwrap"
        if want == "bwrap":
            raise BadInput(f"bubblewrap cannot run here: {why}", REFUSAL_FIX)
    why = landlock_problem(opts.allow_net, bool(opts.allow_hosts))
    if why is None and want == "auto" and os.geteuid() == 0:
        # A root worker's Landlock generator runs as nobody with CAP_DAC_OVERRIDE (to reach the
        # paths it is given through root's 0700 directories), and Landlock (ABI <= 7) does not
        # govern connect() to a named Unix socket: every root socket (an ssh or gpg agent,
        # docker.sock) would be in its reach. Chosen by name it runs; never chosen for root.
        raise BadInput(
            "a root worker's exec generators run under bubblewrap, which cannot run here "
            f"({bwrap_problem() or 'not tried'}): under Landlock a generator could connect to root's "
            "Unix sockets (docker.sock, agents)",
            root_refusal_fix(),
        )
    if why is None:
        return "landlock"
    raise BadInput(
        "exec generators run in a process sandbox, and neither bubblewrap nor Landlock is usable here "
        f"(bwrap: {bwrap_problem() or 'not tried'}; Landlock: {why})",
        REFUSAL_FIX,
    )


def root_refusal_fix() -> str:
    """The ways out for a root worker without bubblewrap, each with what it means."""
    abi = landlock_abi()
    landlock = f"this kernel has Landlock ABI {abi}" if abi else "this kernel has no Landlock"
    return (
        "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap); or choose Landlock knowingly "
        f'({landlock}; the generator could reach root\'s Unix sockets): [sandbox] mechanism = "landlock" in '
        ".genjob/config.toml or GENJOB_SANDBOX=landlock; or run the worker as another user; or, knowing the "
        "generator can then read and write all root can, work --no-sandbox (each receipt records mechanism none); "
        "each probe: git genjob doctor"
    )


def check_writable(paths: tuple[str, ...], mechanism: str) -> None:
    """Each --sandbox-rw path is writable by the user the generator runs as, or BadInput (exit
    2) before any claim: a root worker's bubblewrap generator is `nobody`, without capabilities,
    so root's own 0755 directory would be shown to it read-only in effect."""
    user = sandbox_user() if mechanism == "bwrap" else None
    for path in check_paths(paths, "--sandbox-rw"):
        want = os.W_OK | (os.X_OK if os.path.isdir(path) else 0)
        if user is None:
            if mechanism == "none" or os.access(path, want):
                continue
            raise BadInput(f"--sandbox-rw {path}: not writable by this user", f"chmod u+w {shlex.quote(path)}")
        st = os.stat(path)
        shift = 6 if st.st_uid == user[0] else 3 if st.st_gid == user[1] else 0
        bits = (st.st_mode >> shift) & 0o7
        if bits & want == want:
            continue
        try:
            name = pwd.getpwuid(user[0]).pw_name
        except KeyError:
            name = str(user[0])
        raise BadInput(
            f"--sandbox-rw {path}: a root worker's generator runs as {name}, who cannot write it",
            f"chown {name} {shlex.quote(path)} (or chmod o+rwx), or give a directory {name} owns",
        )


# -- probes (each once per process) ---------------------------------------------------------


@functools.cache
def bwrap_problem() -> str | None:
    """None when `bwrap` is installed and can make the namespaces it is asked for here."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "not installed"
    argv = [exe, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", *_unshare_args(False), "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode != 0:
        return proc.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit {proc.returncode}"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "running as root needs setpriv (util-linux) to run the generator as nobody"
    return None


def _unshare_args(allow_net: bool) -> list[str]:
    args = ["--unshare-pid", "--unshare-ipc"]
    if os.geteuid() != 0:
        args.append("--unshare-user")
    if not allow_net:
        args.append("--unshare-net")
    return args


SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = (
    0x00020000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
)
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(*args: object) -> int:
    result = int(_libc().syscall(*args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none: kernel before 5.13 or Landlock not enabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
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
            ok = _libc().unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC) == 0
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def landlock_problem(allow_net: bool, allow_hosts: bool = False) -> str | None:
    abi = landlock_abi()
    if abi < 1:
        return "not available (Linux 5.13 or later, with landlock in the kernel's lsm= list)"
    if allow_hosts and not userns_works():
        return "--allow-host needs a network namespace of its own, and this user may not create one"
    if not allow_net and abi < 4 and not userns_works():
        return f"ABI {abi} cannot deny network access (ABI 4, Linux 6.7, can) and namespaces are not allowed"
    return None


# -- the view --------------------------------------------------------------------------------


def in_system(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS)


def check_guarded(opts: SandboxOptions, shown: list[str]) -> None:
    """BadInput (exit 2) if a path shown for the program holds the repository or the worker's
    key (`opts.guarded`): a venv made beside the repository would show both with its prefix."""
    for path in shown:
        for guarded in opts.guarded:
            if _inside(os.path.realpath(guarded), os.path.realpath(path)):
                raise BadInput(
                    f"the sandbox would show {path} for the generator's program, and that holds {guarded}",
                    "install the generator outside the repository's directory and the worker key's, or name "
                    "what it needs with --sandbox-ro PATH",
                )


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def check_paths(paths: tuple[str, ...], option: str) -> tuple[str, ...]:
    """Absolute, existing, one printable line each (they are recorded in the receipt)."""
    out = []
    for raw in paths:
        path = os.path.abspath(os.path.expanduser(raw))
        if not path.isprintable() or path != path.strip():
            raise BadInput(f"{option} {raw!r}: a path must be one line of printable characters")
        if not os.path.exists(path):
            raise BadInput(f"{option} {path}: no such file or directory")
        if path == "/":
            raise BadInput(f"{option} /: that is the whole file system", "name what the generator needs")
        out.append(path)
    return tuple(dict.fromkeys(out))


INTERPRETER = re.compile(r"^(python|pypy|node|nodejs|deno|bun|perl|ruby|php|lua|sh|bash|dash|zsh|ksh)[0-9.]*$")


def program_paths(command: str, path_env: str) -> list[str]:
    """What of the command line the sandbox shows besides the system: the program when the
    system has none of that name, its installation when that is a Python venv or a Python
    interpreter's prefix (and the venv's base interpreter), a `#!` script's interpreter, and for
    an interpreter (python, node, sh, ...) the script file it is given. Never another argument
    (`cat ~/.ssh/id_ed25519` shows nothing), never a directory that holds the user's HOME."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = []
        for word in lexer:
            if word and all(c in "();<>|&" for c in word):
                break  # the first simple command only
            words.append(word)
    except ValueError:
        return []
    found: list[str] = []
    args = list(words)
    while args and ASSIGNMENT.match(args[0]):
        args.pop(0)
    if args and args[0] not in SH_WORDS:
        program = args[0]
        exe = program if "/" in program else _which(program, path_env)
        if exe is not None and os.path.isfile(exe):
            found += _installation(exe, path_env, 2)
        if INTERPRETER.match(os.path.basename(program)):
            for word in args[1:]:
                if word in ("-c", "-m", "-e", "--eval", "-"):
                    break  # code on the command line, a module or stdin: no script file
                if not word.startswith("-"):
                    script = os.path.abspath(word)
                    if os.path.isfile(script):
                        found.append(script)
                    break
    home = os.path.realpath(os.path.expanduser("~"))
    keep = []
    for path in dict.fromkeys(os.path.abspath(p) for p in found):
        if in_system(path) or path == "/" or _inside(home, path) or path.startswith(("/proc/", "/dev/", "/sys/")):
            continue
        keep.append(path)
    return [p for p in keep if not any(q != p and _inside(p, q) for q in keep)]


def _which(program: str, path_env: str) -> str | None:
    """The program PATH finds, unless the system has one of that name too (a pyenv shim or a
    wrapper outside the system would then be found first in the sandbox, and fail there)."""
    first = None
    for d in path_env.split(os.pathsep):
        candidate = os.path.join(d or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            if in_system(os.path.abspath(d)):
                return None
            first = first or os.path.abspath(candidate)
    return first


def _installation(exe: str, path_env: str, depth: int) -> list[str]:
    out = [exe]
    real = os.path.realpath(exe)
    if real != exe:
        out.append(real)
    for p in dict.fromkeys((exe, real)):
        bindir = os.path.dirname(p)
        prefix = os.path.dirname(bindir)
        if os.path.basename(bindir) != "bin":
            continue
        cfg = os.path.join(prefix, "pyvenv.cfg")
        if os.path.isfile(cfg):
            out.append(prefix)
            out += _venv_base(cfg)
        elif os.path.basename(p).startswith("python") and os.path.isdir(os.path.join(prefix, "lib")):
            out.append(prefix)
    if depth > 0:
        interp = _shebang(real)
        if interp:
            words = interp.split()
            first = words[0]
            if os.path.basename(first) == "env" and len(words) > 1:
                found = shutil.which(words[1], path=path_env)
                first = found or ""
            if first and not in_system(first):
                out += _installation(first, path_env, depth - 1)
    return out


def _venv_base(cfg: str) -> list[str]:
    try:
        with open(cfg, encoding="utf-8") as fh:
            for line in fh:
                name, _, value = line.partition("=")
                if name.strip() == "home" and value.strip():
                    bindir = value.strip()
                    prefix = os.path.dirname(bindir.rstrip("/"))
                    return [prefix] if os.path.basename(bindir.rstrip("/")) == "bin" and prefix else []
    except OSError:
        pass
    return []


def _shebang(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip() or None


def _etc_paths() -> list[str]:
    return [p for name in ETC if os.path.lexists(p := os.path.join("/etc", name))]


# -- one attempt -------------------------------------------------------------------------------


@dataclass
class Launch:
    """How to start one attempt's generator: the argv, the environment it adds, what runs in the
    child before exec, and the record the receipt carries."""

    argv: list[str]
    env: dict[str, str]
    preexec: Callable[[], None] | None
    record: dict[str, object]
    close: Callable[[], None] = lambda: None  # once the generator has started
    finish: Callable[[], None] = lambda: None  # once it has ended (the --allow-host proxy)
    fds: tuple[int, ...] = ()  # descriptors the child inherits (Popen's pass_fds); `close` closes them
    # The caller adds nothing in the child (no parent-death signal): bwrap --die-with-parent ties
    # the launch to the worker, or the launch runs from a thread of its own (`spawner`), which
    # a parent-death signal would take for the parent. With no `preexec` either, no Python runs
    # in the child and Popen starts it with vfork, whose cost does not grow with the worker's
    # memory as fork's does.
    tied: bool = False
    # Runs the caller's Popen (in a confined thread of the worker); None: where it is called.
    spawner: Callable[[Callable[[], object]], object] | None = None

    def start(self, popen: Callable[[], P]) -> P:
        """The generator's process: `popen()`, run as this launch needs."""
        if self.spawner is None:
            return popen()
        return cast(P, self.spawner(popen))


@dataclass
class Attempt:
    """The paths of one attempt: all inside the attempt's own directory, removed with it."""

    scratch: str
    job_files: list[str]
    log: str
    home: str
    tmp: str
    err_log: str | None = None  # the generator's stderr, where it is not `log`
    walked: list[str] = field(default_factory=list)  # directories a `..` in the program path walks through


def unconfined(argv: list[str]) -> Launch:
    return Launch(argv, {}, None, record("none", "all", SandboxOptions(), [], None))


def record(
    mechanism: str, network: str, opts: SandboxOptions, auto: list[str], limits: SandboxLimits | None
) -> dict[str, object]:
    return {
        "mechanism": mechanism,
        "network": network,
        "hosts": list(opts.allow_hosts),
        "ro": list(dict.fromkeys([*opts.ro, *auto])),
        "rw": list(opts.rw),
        "limits": limits.to_dict() if limits is not None else None,
    }


def sandbox_user() -> tuple[int, int] | None:
    """(uid, gid) the generator runs as when the worker is root; None: the worker's own."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam("nobody")
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        return 65534, 65534


def _hand_over(attempt: Attempt, user: tuple[int, int] | None) -> None:
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


def _rlimits(limits: SandboxLimits, uid: int) -> list[tuple[int, int]]:
    return [
        (resource.RLIMIT_NPROC, limits.procs + tasks_of(uid)),
        (resource.RLIMIT_DATA, limits.memory),
        (resource.RLIMIT_FSIZE, limits.file_size),
        (resource.RLIMIT_CPU, limits.cpu),
        (resource.RLIMIT_CORE, 0),
    ]


def _set_rlimits(values: list[tuple[int, int]]) -> None:
    for which, value in values:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


def confine(
    mechanism: str, opts: SandboxOptions, command: str, attempt: Attempt, path_env: str, gateway: str | None = None
) -> Launch:
    """The launch of `sh -c COMMAND` under `mechanism` for one attempt; `gateway`: the Unix socket
    of the attempt's model gateway, relayed to 127.0.0.1:GATEWAY_PORT inside."""
    argv = ["sh", "-c", command]
    if mechanism == "none":
        return unconfined(argv)
    for d in (attempt.home, attempt.tmp):
        os.makedirs(d, exist_ok=True)
    ro = check_paths(opts.ro, "--sandbox-ro")
    rw = check_paths(opts.rw, "--sandbox-rw")
    auto = [p for p in program_paths(command, path_env) if p not in ro and p not in rw]
    check_guarded(opts, auto)
    attempt.walked = walked_dirs(command)
    user = sandbox_user()
    _hand_over(attempt, user)
    limits = _rlimits(opts.limits, user[0] if user else os.getuid())
    proxy = None
    hidden: list[str] = []
    pairs: list[str] = []
    if opts.allow_hosts:
        from git_genjob.worker.generators.proxy import RELAY_PORT, HostProxy, parse_hosts

        proxy_dir = os.path.join(os.path.dirname(attempt.scratch), "proxy")
        os.makedirs(proxy_dir, exist_ok=True)
        os.chmod(proxy_dir, 0o755)
        proxy = HostProxy(os.path.join(proxy_dir, "sock"), parse_hosts(opts.allow_hosts), user)
        hidden = [proxy_dir]
        pairs += [proxy.path, str(RELAY_PORT)]
    if gateway is not None:
        from git_genjob.worker.generators.proxy import GATEWAY_PORT

        if user is not None:
            os.chown(gateway, *user)
        hidden.append(os.path.dirname(gateway))
        pairs += [gateway, str(GATEWAY_PORT)]
    if pairs:
        from git_genjob.worker.generators.proxy import RELAY

        python = os.path.abspath(sys.executable)
        auto += [p for p in _installation(python, path_env, 0) if not in_system(p) and p not in auto]
        argv = ["sh", "-c", RELAY_WRAPPER, command, python, RELAY, *pairs]
    try:
        if mechanism == "bwrap":
            launch = _bwrap(opts, argv, attempt, [*ro, *auto, *hidden], list(rw), user, limits, auto)
        else:
            launch = _landlock(opts, argv, attempt, [*ro, *auto, *hidden], list(rw), user, limits, auto, bool(pairs))
    except BaseException:
        if proxy is not None:
            proxy.close()
        raise
    launch.env["PATH"] = visible_path(path_env, [*ro, *auto, *rw, attempt.scratch])
    if proxy is not None:
        url = f"http://127.0.0.1:{RELAY_PORT}"
        launch.env.update(HTTPS_PROXY=url, HTTP_PROXY=url, https_proxy=url, http_proxy=url)
        launch.finish = proxy.close
    return launch


# The --allow-host relay starts first (it listens before it returns), then the generator: `$0`.
RELAY_WRAPPER = (
    'p="$1"; r="$2"; shift 2; '
    '"$p" -I -S -c "$r" "$@" || { echo "genjob: the --allow-host relay did not start" >&2; exit 97; }; '
    'exec sh -c "$0"'
)


def visible_path(path_env: str, shown: list[str]) -> str:
    """PATH without the directories the sandbox hides: under Landlock they can still be looked
    at (stat, readlink), and an interpreter that finds itself there (a venv's python3) would
    compute a prefix it may not read."""
    keep = [
        d
        for d in path_env.split(os.pathsep)
        if os.path.isabs(d) and (in_system(os.path.realpath(d)) or any(_inside(d, p) for p in shown))
    ]
    return os.pathsep.join(dict.fromkeys(keep)) or "/usr/bin:/bin"


def _bwrap(
    opts: SandboxOptions,
    argv: list[str],
    attempt: Attempt,
    ro: list[str],
    rw: list[str],
    user: tuple[int, int] | None,
    limits: list[tuple[int, int]],
    auto: list[str],
) -> Launch:
    exe = shutil.which("bwrap") or "bwrap"
    args = [exe, "--die-with-parent", "--new-session", *_unshare_args(opts.allow_net)]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    # A read-write path inside /etc would turn read-only with it: then every file is bound, as before.
    copy_etc = not any(_inside(p, "/etc") for p in rw)
    etc, fds = _bwrap_etc(opts.allow_net, copy_etc)
    args += etc
    fds.append(seccomp_fd())
    args += ["--seccomp", str(fds[-1])]
    args += ["--dev", "/dev", "--proc", "/proc", "--bind", attempt.tmp, "/tmp"]
    binds: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    for flag, p in [("--ro-bind", p) for p in ro] + [("--bind", p) for p in rw]:
        if os.path.islink(p):  # bound at its target, shown at its own path as a symlink
            links.append((os.path.realpath(p), p))
            p = os.path.realpath(p)
        binds.append((flag, p))
    binds.sort(key=lambda b: b[1].count("/"))
    shown: list[str] = []
    extra: list[str] = []
    for flag, p in binds:
        if flag == "--ro-bind" and any(_inside(p, q) for q in shown):
            continue  # already visible read-only
        shown.append(p)
        extra += [flag, p, p]
    for target, p in links:
        if not any(_inside(p, q) for q in shown):
            extra += ["--symlink", target, p]
            shown.append(p)
    dests = [attempt.home, attempt.scratch, *attempt.job_files, *shown]
    parents = {a for d in [*dests, *attempt.walked] for a in [*_ancestors(d), d]} - {"/", "/tmp", *dests}
    for d in sorted(parents, key=lambda a: (a.count("/"), a)):
        if not in_system(d) and not any(_inside(d, q) for q in shown):
            args += ["--perms", "0755", "--dir", d]  # bwrap would make them 0700: unreadable to nobody
    for p in (attempt.home, attempt.scratch):
        args += ["--bind", p, p]
    for p in attempt.job_files:
        args += ["--ro-bind", p, p]
    args += extra
    if copy_etc and user is None:
        # Last (binds inside /etc need their mount points made first). In a user namespace the
        # copies belong to the generator's user; for a root worker they are root's and the
        # generator is `nobody` without capabilities, as for the rest of bubblewrap's root tmpfs.
        args += ["--remount-ro", "/etc"]
    args += ["--chdir", attempt.scratch]
    if user is not None:
        uid, gid = user
        setpriv = shutil.which("setpriv") or "setpriv"
        args += [
            "--",
            setpriv,
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ]
    else:
        args.append("--")

    network = "all" if opts.allow_net else "hosts" if opts.allow_hosts else "none"
    rec = record("bwrap", network, opts, auto, opts.limits)
    prlimit = _prlimit()

    def close() -> None:
        for fd in fds:
            os.close(fd)

    if prlimit is None:  # no util-linux prlimit: the limits are set in the forked child

        def preexec() -> None:
            _set_rlimits(limits)

        return Launch([*args, *argv], {"TMPDIR": "/tmp"}, preexec, rec, close, fds=tuple(fds))
    argv = [*prlimit_args(prlimit, limits), *args, *argv]
    return Launch(argv, {"TMPDIR": "/tmp"}, None, rec, close, fds=tuple(fds), tied=True)


@functools.cache
def _prlimit() -> str | None:
    return shutil.which("prlimit")


PRLIMIT_NAMES = {
    resource.RLIMIT_NPROC: "nproc",
    resource.RLIMIT_DATA: "data",
    resource.RLIMIT_FSIZE: "fsize",
    resource.RLIMIT_CPU: "cpu",
    resource.RLIMIT_CORE: "core",
}


def prlimit_args(exe: str, values: list[tuple[int, int]]) -> list[str]:
    """`prlimit --nproc=N:N ... --`: the limits `_set_rlimits` would set, set by util-linux's
    prlimit, which then execs bubblewrap (same process, no fork)."""
    out = [exe]
    for which, value in values:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        out.append(f"--{PRLIMIT_NAMES[which]}={value}:{value}")
    return [*out, "--"]


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
        for p in _etc_paths():
            for d in reversed(_ancestors(p)):
                if _inside(d, "/etc") and d not in made:
                    made.add(d)
                    args += ["--perms", "0755", "--dir", d]
            if os.path.islink(p) and not (allow_net and p == "/etc/resolv.conf"):
                args += ["--symlink", os.readlink(p), p]
                continue
            if not copy:
                if os.path.exists(p):
                    args += ["--ro-bind", p, p]
                continue
            try:
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                if os.path.exists(p):
                    args += ["--ro-bind", p, p]
                continue
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_uid == 0 and st.st_mode & 0o004:
                fds.append(fd)
                args += ["--perms", f"{stat.S_IMODE(st.st_mode) & 0o755:04o}", "--file", str(fd), p]
            else:
                os.close(fd)
                args += ["--ro-bind", p, p]
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return args, fds


# Process control a generator never needs, denied (EPERM) by a seccomp filter in every sandbox:
# a generator that PTRACE_ATTACHes its own `sh` parent would stop it, and the attempt with it,
# until the timeout. By audit architecture: ptrace, process_vm_readv/writev, kcmp, pidfd_getfd.
SECCOMP_DENIED = {
    0xC000003E: (101, 310, 311, 312, 438),  # x86_64 (and any x32 call, which it denies whole)
    0x40000003: (26, 347, 348, 349, 438),  # i386, reachable from x86_64 by int 0x80
    0xC00000B7: (117, 270, 271, 272, 438),  # aarch64
}
_BPF_LD_ABS, _BPF_JEQ, _BPF_JGE, _BPF_RET = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


def seccomp_program() -> bytes:
    """The filter as the kernel takes it: struct sock_filter[] (u16 code, u8 jt, u8 jf, u32 k),
    on struct seccomp_data (nr at offset 0, arch at 4). What bwrap --seccomp FD reads."""
    code: list[tuple[int, int, int, int]] = [(_BPF_LD_ABS, 0, 0, 4)]
    for arch, nrs in SECCOMP_DENIED.items():
        body: list[tuple[int, int, int, int]] = [(_BPF_LD_ABS, 0, 0, 0)]
        if arch == 0xC000003E:
            body.append((_BPF_JGE, 0xFF, 0, 0x40000000))  # x32: jt patched to the deny below
        body += [(_BPF_JEQ, 0xFF, 0, nr) for nr in nrs]
        body.append((_BPF_RET, 0, 0, _RET_ALLOW))
        code.append((_BPF_JEQ, 0, len(body), arch))
        code += body
    code.append((_BPF_RET, 0, 0, _RET_ALLOW))  # another architecture: as the kernel has it
    deny = len(code)
    code.append((_BPF_RET, 0, 0, _RET_EPERM))
    out = bytearray()
    for i, (op, jt, jf, k) in enumerate(code):
        if jt == 0xFF:
            jt = deny - i - 1
        out += struct.pack("=HBBI", op, jt, jf, k)
    return bytes(out)


def seccomp_fd() -> int:
    """A pipe's read end holding the filter, for bwrap --seccomp FD (the caller closes it)."""
    prog = seccomp_program()
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, prog)
    finally:
        os.close(write_end)
    return read_end


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp_applier() -> Callable[[], None]:
    """What installs the filter on the calling thread (no_new_privs must be set first): built
    here, so the forked child only makes the call."""
    prog = ctypes.create_string_buffer(seccomp_program())
    fprog = _SockFprog(len(prog.raw) // 8, ctypes.cast(prog, ctypes.c_void_p))
    libc = _libc()

    def apply() -> None:
        _ = prog  # kept alive with the closure
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")

    return apply


def walked_dirs(command: str) -> list[str]:
    """The directories the kernel walks through for a `..` in the program's path: `DIR/sub` of
    `DIR/sub/../tool.sh`. The sandbox shows only `DIR/tool.sh`, so each is made there (an empty
    mount point) and the path resolves inside as it does outside (a symlink is followed as the
    kernel would, to the directory it names)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    program = next((w for w in words if not ASSIGNMENT.match(w)), "")
    if not program.startswith("/") or ".." not in program.split("/"):
        return []
    out: list[str] = []
    here = "/"
    for part in program.split("/")[:-1]:
        if part in ("", "."):
            continue
        if part == "..":
            if os.path.isdir(here) and not os.path.islink(here) and here != "/":
                out.append(here)
            here = os.path.dirname(os.path.realpath(here))
        else:
            here = os.path.join(here, part)
    return [d for d in dict.fromkeys(out) if not in_system(d)]


def _ancestors(path: str) -> list[str]:
    out = []
    while (parent := os.path.dirname(path)) != path:
        out.append(parent)
        path = parent
    return out


# Landlock rights (include/uapi/linux/landlock.h), by the ABI that added them.
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_REMOVE_DIR, FS_REMOVE_FILE, FS_MAKE_CHAR, FS_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK, FS_MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
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
    fd = _syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for path, rights in rules:
            try:
                target = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # an optional system path that is not there
            try:
                if not stat.S_ISDIR(os.fstat(target).st_mode):  # fstat of an O_PATH fd: Linux 3.6+
                    rights &= FILE_RIGHTS
                beneath = _PathBeneath(rights & handled, target)
                _syscall(SYS_LANDLOCK_ADD_RULE, fd, ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(beneath), 0)
            finally:
                os.close(target)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _landlock(
    opts: SandboxOptions,
    argv: list[str],
    attempt: Attempt,
    ro: list[str],
    rw: list[str],
    user: tuple[int, int] | None,
    limits: list[tuple[int, int]],
    auto: list[str],
    relay: bool = False,  # the relay runs (--allow-host, the gateway): it needs the namespace's loopback
) -> Launch:
    rules = [(d, RO) for d in SYSTEM_DIRS] + [(p, RO) for p in _etc_paths()] + [("/proc", RO)]
    rules += [(d, DEV) for d in DEVICES] + [(p, DEV) for p in (attempt.log, attempt.err_log) if p]
    rules += [(p, RO) for p in [*attempt.job_files, *ro]]
    rules += [(p, RW) for p in [attempt.scratch, attempt.home, attempt.tmp, *rw]]
    if opts.allow_net:
        resolv = os.path.realpath("/etc/resolv.conf")
        rules.append((resolv, RO))
    namespaces = userns_works()
    flags = CLONE_NEWPID | CLONE_NEWIPC if namespaces else 0
    if namespaces and not opts.allow_net:
        flags |= CLONE_NEWNET
    if flags and os.geteuid() != 0:
        flags |= CLONE_NEWUSER
    # With a network namespace of its own (--allow-host needs one) the relay binds and connects on
    # its loopback: Landlock's TCP rule would only stop it; the namespace already holds nothing else.
    ruleset = landlock_ruleset(rules, deny_tcp=not opts.allow_net and not (relay and flags & CLONE_NEWNET))
    uid, gid = os.getuid(), os.getgid()
    libc = _libc()
    last_cap = _last_cap()
    if opts.allow_net:
        network = "all"
    elif opts.allow_hosts:
        network = "hosts"
    else:
        network = "none" if flags & CLONE_NEWNET else "tcp-denied"
    rec = record("landlock", network, opts, auto, opts.limits)
    prlimit = _prlimit()
    setid = SETID_SYSCALLS.get(platform.machine())
    seccomp = seccomp_applier()
    if user is not None and flags and not flags & CLONE_NEWUSER and prlimit is not None and setid is not None:
        # A root worker confines one thread of its own and starts the generator from it (vfork,
        # no fork of the worker): namespaces for its children, `nobody`, no_new_privs and the
        # Landlock domain are all per thread; the limits (per process) are set by prlimit.
        # The generator is the first process of its PID namespace and, in a session of its
        # own, cannot leave the process group the worker's reaper kills.

        def confine_thread() -> None:
            if libc.unshare(flags) != 0:
                raise OSError(ctypes.get_errno(), "unshare")
            if flags & CLONE_NEWNET and relay:
                _loopback_up()
            _become(user, last_cap, setid)
            if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
            if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
                raise OSError(ctypes.get_errno(), "landlock_restrict_self")
            seccomp()

        return Launch(
            [*prlimit_args(prlimit, limits), *argv],
            {"TMPDIR": attempt.tmp},
            None,
            rec,
            lambda: os.close(ruleset),
            tied=True,
            spawner=_in_thread(confine_thread),
        )
    # Else the Python child is confined. The generator must be the first process of its PID
    # namespace: util-linux `unshare --fork` (no namespace of its own to make) is the small
    # process that forks it and waits; a fork in the Python child would copy the worker's page
    # tables a second time and tear them down at the end, a cost that grows with the worker's
    # memory. It runs as the generator, confined.
    forker = _unshare() if flags & CLONE_NEWPID else None
    if forker is not None:
        argv = [forker, "--fork", "--kill-child", "--", *argv]
        if user is not None:  # it counts as one of `nobody`'s processes (the Python one was root's)
            limits = [(w, v + 1 if w == resource.RLIMIT_NPROC else v) for w, v in limits]

    def preexec() -> None:
        if flags:
            if libc.unshare(flags) != 0:
                raise OSError(ctypes.get_errno(), "unshare")
            if flags & CLONE_NEWUSER:
                for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                    with open(f"/proc/self/{name}", "w") as fh:
                        fh.write(text)
            if flags & CLONE_NEWNET and relay:
                _loopback_up()
            if forker is None:
                _become_pid_one()
        _set_rlimits(limits)
        if user is not None:
            _become(user, last_cap)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
        seccomp()

    return Launch(argv, {"TMPDIR": attempt.tmp}, preexec, rec, lambda: os.close(ruleset))


# setgroups, setresgid, setresuid by architecture: glibc's functions change every thread of the
# process (POSIX), the system calls only the calling one.
SETID_SYSCALLS = {"x86_64": (116, 119, 117), "aarch64": (159, 149, 147)}


def _in_thread(confine_thread: Callable[[], None]) -> Callable[[Callable[[], object]], object]:
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
def _unshare() -> str | None:
    return shutil.which("unshare")


def _loopback_up() -> None:
    """`ip link set lo up` in the new network namespace (bubblewrap does the same)."""
    import fcntl
    import socket
    import struct

    siocsifflags, iff_up, iff_loopback, iff_running = 0x8914, 0x1, 0x8, 0x40
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH22x", b"lo", iff_up | iff_loopback | iff_running))


PR_SET_KEEPCAPS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 8, 24, 47, 2
CAP_DAC_OVERRIDE = 1
LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 40


def _become(user: tuple[int, int], last_cap: int, setid: tuple[int, int, int] | None = None) -> None:
    """Root's Landlock child becomes `nobody` with one capability, CAP_DAC_OVERRIDE (ambient, so
    it survives exec): the process limit binds (root's processes are exempt from it) and the
    paths Landlock allows stay reachable through root's 0700 directories (pyenv under /root, a
    test's tmp_path). Landlock, not file modes, decides what it may touch. With `setid` (the
    setgroups, setresgid, setresuid system call numbers) only the calling thread changes: glibc's
    functions change every thread of the process (POSIX)."""
    libc = _libc()
    for cap in range(last_cap + 1):
        if cap != CAP_DAC_OVERRIDE:
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    if libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_KEEPCAPS)")
    if setid is None:
        os.setgroups([])
        os.setresgid(user[1], user[1], user[1])
        os.setresuid(user[0], user[0], user[0])
    else:
        nr_setgroups, nr_setresgid, nr_setresuid = setid
        if libc.syscall(nr_setgroups, 0, None) != 0:
            raise OSError(ctypes.get_errno(), "setgroups")
        if libc.syscall(nr_setresgid, user[1], user[1], user[1]) != 0:
            raise OSError(ctypes.get_errno(), "setresgid")
        if libc.syscall(nr_setresuid, user[0], user[0], user[0]) != 0:
            raise OSError(ctypes.get_errno(), "setresuid")
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    one = 1 << CAP_DAC_OVERRIDE
    data = (_CapData * 2)(_CapData(one, one, one), _CapData(0, 0, 0))
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_OVERRIDE, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAP_AMBIENT_RAISE)")


def _become_pid_one() -> None:
    """In the child, after unshare(CLONE_NEWPID): fork, so that the generator is the first process
    of the new PID namespace (when it ends, the kernel kills everything it left). The parent stays
    behind only to wait for it and exit as it did; it closes every other descriptor, so the
    worker's Popen sees the exec of the generator itself."""
    pid = os.fork()
    if pid == 0:
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the worker's reaper kills the group too
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
