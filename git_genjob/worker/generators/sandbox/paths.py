"""What the sandbox shows: the system directories and the files of /etc that tools read, the
checks of the owner's --sandbox-ro / --sandbox-rw paths, and the paths found for the generator's
program (its installation, its interpreter, its script), never one that holds the repository,
the worker's key or the user's HOME."""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import sys

from git_genjob.documents.errors import BadInput
from git_genjob.worker.generators.sandbox.identity import sandbox_user
from git_genjob.worker.generators.sandbox.options import SandboxOptions
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


def in_system(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS)


def check_guarded(opts: SandboxOptions, shown: list[str]) -> None:
    """BadInput (exit 2) if a path shown for the program holds the repository or the worker's
    key (`opts.guarded`): a venv made beside the repository would show both with its prefix."""
    for path in shown:
        for guarded in opts.guarded:
            if inside(os.path.realpath(guarded), os.path.realpath(path)):
                raise BadInput(
                    f"the sandbox would show {path} for the generator's program, and that holds {guarded}",
                    "install the generator outside the repository's directory and the worker key's, or name "
                    "what it needs with --sandbox-ro PATH",
                )


def inside(path: str, parent: str) -> bool:
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
            raise BadInput(
                f"{option} /: that is the whole file system",
                "name what the generator needs",
            )
        out.append(path)
    return tuple(dict.fromkeys(out))


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
            raise BadInput(
                f"--sandbox-rw {path}: not writable by this user",
                f"chmod u+w {shlex.quote(path)}",
            )
        if _mode_allows(os.stat(path), user, want):
            continue
        name = _user_name(user[0])
        raise BadInput(
            f"--sandbox-rw {path}: a root worker's generator runs as {name}, who cannot write it",
            f"chown {name} {shlex.quote(path)} (or chmod o+rwx), or give a directory {name} owns",
        )


def _mode_allows(st: os.stat_result, user: tuple[int, int], want: int) -> bool:
    """Whether the file's mode bits for `user` (owner, group or other: no capabilities) grant `want`."""
    shift = 6 if st.st_uid == user[0] else 3 if st.st_gid == user[1] else 0
    bits = (st.st_mode >> shift) & 0o7
    return bits & want == want


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


INTERPRETER = re.compile(r"^(python|pypy|node|nodejs|deno|bun|perl|ruby|php|lua|sh|bash|dash|zsh|ksh)[0-9.]*$")


def program_paths(command: str, path_env: str) -> list[str]:
    """What of the command line the sandbox shows besides the system: the program when the
    system has none of that name, its installation when that is a Python venv or a Python
    interpreter's prefix (and the venv's base interpreter), a `#!` script's interpreter, and for
    an interpreter (python, node, sh, ...) the script file it is given. Never another argument
    (`cat ~/.ssh/id_ed25519` shows nothing), never a directory that holds the user's HOME."""
    args = _first_command(command)
    if args is None:
        return []
    while args and ASSIGNMENT.match(args[0]):
        args.pop(0)
    found = _program_files(args, path_env) if args and args[0] not in SH_WORDS else []
    return _outermost_shown(found)


def _outermost_shown(found: list[str]) -> list[str]:
    """The found paths made absolute, once each, less those never shown and those inside another."""
    home = os.path.realpath(os.path.expanduser("~"))
    keep = [p for p in dict.fromkeys(os.path.abspath(p) for p in found) if not _never_shown(p, home)]
    return [p for p in keep if not any(q != p and inside(p, q) for q in keep)]


def _first_command(command: str) -> list[str] | None:
    """The words of the command line's first simple command; None when it does not parse."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = []
        for word in lexer:
            if word and all(c in "();<>|&" for c in word):
                break  # the first simple command only
            words.append(word)
    except ValueError:
        return None
    return words


def _program_files(args: list[str], path_env: str) -> list[str]:
    """The program `args[0]` and its installation, and an interpreter's script file."""
    program = args[0]
    found: list[str] = []
    exe = program if "/" in program else _which(program, path_env)
    if exe is not None and os.path.isfile(exe):
        found += installation(exe, path_env, 2)
    if INTERPRETER.match(os.path.basename(program)):
        found += _script(args[1:])
    return found


def _script(args: list[str]) -> list[str]:
    """The script file an interpreter is given: its first word that is not an option, unless
    the code comes on the command line, as a module or on stdin."""
    for word in args:
        if word in ("-c", "-m", "-e", "--eval", "-"):
            return []  # code on the command line, a module or stdin: no script file
        if not word.startswith("-"):
            script = os.path.abspath(word)
            return [script] if os.path.isfile(script) else []
    return []


def _never_shown(path: str, home: str) -> bool:
    """The system (shown anyway), `/`, a directory holding HOME, and the kernel's file systems."""
    return in_system(path) or path == "/" or inside(home, path) or path.startswith(("/proc/", "/dev/", "/sys/"))


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


def installation(exe: str, path_env: str, depth: int) -> list[str]:
    """The program, its real path and what it runs from: a venv's or a Python's prefix and, up to
    `depth` `#!` lines deep, its interpreter's installation."""
    out = [exe]
    real = os.path.realpath(exe)
    if real != exe:
        out.append(real)
    out += _prefixes(exe, real)
    if depth > 0:
        out += _interpreter_installation(real, path_env, depth - 1)
    return out


def _prefixes(exe: str, real: str) -> list[str]:
    """The prefix of each of `exe` and `real` that sits in a `bin/` directory of a venv (and the
    venv's base) or of a Python installation."""
    out: list[str] = []
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
    return out


def _interpreter_installation(script: str, path_env: str, depth: int) -> list[str]:
    """The installation of the interpreter the script's `#!` line names (`env NAME`: NAME as PATH
    finds it), unless it is the system's."""
    interp = _shebang(script)
    if not interp:
        return []
    words = interp.split()
    first = words[0]
    if os.path.basename(first) == "env" and len(words) > 1:
        found = shutil.which(words[1], path=path_env)
        first = found or ""
    if first and not in_system(first):
        return installation(first, path_env, depth)
    return []


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


def etc_paths() -> list[str]:
    return [p for name in ETC if os.path.lexists(p := os.path.join("/etc", name))]


def visible_path(path_env: str, shown: list[str]) -> str:
    """PATH without the directories the sandbox hides: under Landlock they can still be looked
    at (stat, readlink), and an interpreter that finds itself there (a venv's python3) would
    compute a prefix it may not read."""
    keep = [
        d
        for d in path_env.split(os.pathsep)
        if os.path.isabs(d) and (in_system(os.path.realpath(d)) or any(inside(d, p) for p in shown))
    ]
    return os.pathsep.join(dict.fromkeys(keep)) or "/usr/bin:/bin"


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
    return [d for d in dict.fromkeys(_stepped_out_of(program)) if not in_system(d)]


def _stepped_out_of(program: str) -> list[str]:
    """Each real directory a `..` of the absolute path `program` steps back out of, as the kernel
    resolves it (through a symlink to the directory it names)."""
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
    return out


def ancestors(path: str) -> list[str]:
    out = []
    while (parent := os.path.dirname(path)) != path:
        out.append(parent)
        path = parent
    return out
