"""Which mechanism runs here (`bwrap`, `landlock` or `none`), decided once before any claim, and
the refusal, with every way out, when neither sandbox is usable."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

from git_genjob.documents.errors import BadInput
from git_genjob.worker.generators.proxy import parse_hosts
from git_genjob.worker.generators.sandbox.bwrap import unshare_args
from git_genjob.worker.generators.sandbox.landlock import landlock_abi, userns_works
from git_genjob.worker.generators.sandbox.options import SandboxOptions

REFUSAL_FIX = (
    "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap), or use a Linux kernel "
    "with Landlock (5.13 or later); or, knowing the generator can then read and write what this user "
    "can, run it unconfined with work --no-sandbox (each receipt records it); each probe: git genjob doctor"
)


def choose(opts: SandboxOptions) -> str:
    """The mechanism this worker uses (`bwrap`, `landlock` or `none`), or BadInput (exit 2)
    before any job is claimed. GENJOB_SANDBOX=bwrap|landlock picks one, as `mechanism` does."""
    if opts.mechanism == "none":
        return "none"
    want = _wanted(opts)
    if want in ("auto", "bwrap"):
        why = bwrap_problem()
        if why is None:
            return "bwrap"
        if want == "bwrap":
            raise BadInput(f"bubblewrap cannot run here: {why}", REFUSAL_FIX)
    return _landlock_or_refusal(opts, want)


def _wanted(opts: SandboxOptions) -> str:
    """The mechanism asked for (`auto`, `bwrap` or `landlock`), checked before any probe: a known
    name, a platform with a sandbox, and network options that fit together."""
    want = os.environ.get("GENJOB_SANDBOX") or opts.mechanism
    if want not in ("auto", "bwrap", "landlock"):
        raise BadInput(f"GENJOB_SANDBOX={want!r}: use bwrap or landlock", "or work --no-sandbox")
    if not sys.platform.startswith("linux"):
        raise BadInput(
            f"exec generators run in a process sandbox, and none is available on {sys.platform} yet",
            "run it unconfined with work --no-sandbox (each receipt records it)",
        )
    if opts.allow_hosts:
        parse_hosts(opts.allow_hosts)
        if opts.allow_net:
            raise BadInput("--allow-host and --allow-net: the second already opens every host", "give one of them")
    return want


def _landlock_or_refusal(opts: SandboxOptions, want: str) -> str:
    """`landlock` when bubblewrap is not the answer and Landlock is usable (never chosen for root
    by `auto`); BadInput naming both probes otherwise."""
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


@functools.cache
def bwrap_problem() -> str | None:
    """None when `bwrap` is installed and can make the namespaces it is asked for here."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "not installed"
    argv = [exe, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", *unshare_args(False), "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode != 0:
        return proc.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit {proc.returncode}"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "running as root needs setpriv (util-linux) to run the generator as nobody"
    return None


def landlock_problem(allow_net: bool, allow_hosts: bool = False) -> str | None:
    abi = landlock_abi()
    if abi < 1:
        return "not available (Linux 5.13 or later, with landlock in the kernel's lsm= list)"
    if allow_hosts and not userns_works():
        return "--allow-host needs a network namespace of its own, and this user may not create one"
    if not allow_net and abi < 4 and not userns_works():
        return f"ABI {abi} cannot deny network access (ABI 4, Linux 6.7, can) and namespaces are not allowed"
    return None
