"""One attempt's launch: the paths shown, the attempt's directories handed over, the limits,
the --allow-host proxy and the gateway relay, then the mechanism's own launch."""

from __future__ import annotations

import os
import sys

from git_genjob.worker.generators.proxy import GATEWAY_PORT, RELAY, RELAY_PORT, HostProxy, parse_hosts
from git_genjob.worker.generators.sandbox.bwrap import bwrap_launch
from git_genjob.worker.generators.sandbox.identity import hand_over, sandbox_user
from git_genjob.worker.generators.sandbox.landlock import landlock_launch
from git_genjob.worker.generators.sandbox.limits import rlimits
from git_genjob.worker.generators.sandbox.options import Attempt, Launch, SandboxOptions, View, unconfined
from git_genjob.worker.generators.sandbox.paths import (
    check_guarded,
    check_paths,
    in_system,
    installation,
    program_paths,
    visible_path,
    walked_dirs,
)


def confine(
    mechanism: str,
    opts: SandboxOptions,
    command: str,
    attempt: Attempt,
    path_env: str,
    gateway: str | None = None,
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
    auto = _program_paths_not_given(command, path_env, ro, rw)
    check_guarded(opts, auto)
    attempt.walked = walked_dirs(command)
    user = sandbox_user()
    hand_over(attempt, user)
    limits = rlimits(opts.limits, user[0] if user else os.getuid())
    proxy, hidden, pairs = _relays(opts, attempt, user, gateway)
    if pairs:
        argv = _relay_first(command, path_env, pairs, auto)
    try:
        view = View(argv, attempt, [*ro, *auto, *hidden], list(rw), user, limits, auto, bool(pairs))
        launch = (bwrap_launch if mechanism == "bwrap" else landlock_launch)(opts, view)
    except BaseException:
        if proxy is not None:
            proxy.close()
        raise
    _set_paths_and_proxy(launch, visible_path(path_env, [*ro, *auto, *rw, attempt.scratch]), proxy)
    return launch


def _program_paths_not_given(command: str, path_env: str, ro: tuple[str, ...], rw: tuple[str, ...]) -> list[str]:
    """The paths the command's programs need that --sandbox-ro and --sandbox-rw do not already show."""
    return [p for p in program_paths(command, path_env) if p not in ro and p not in rw]


def _relay_first(command: str, path_env: str, pairs: list[str], auto: list[str]) -> list[str]:
    """The argv that starts the relay (this Python, whose installation joins `auto`), then the command."""
    python = os.path.abspath(sys.executable)
    auto += [p for p in installation(python, path_env, 0) if not in_system(p) and p not in auto]
    return ["sh", "-c", RELAY_WRAPPER, command, python, RELAY, *pairs]


def _set_paths_and_proxy(launch: Launch, path: str, proxy: HostProxy | None) -> None:
    """The generator's PATH (what it can see of the worker's), and its HTTP(S)_PROXY: the relay
    to the --allow-host proxy, closed once the launch finishes."""
    launch.env["PATH"] = path
    if proxy is not None:
        url = f"http://127.0.0.1:{RELAY_PORT}"
        launch.env.update(HTTPS_PROXY=url, HTTP_PROXY=url, https_proxy=url, http_proxy=url)
        launch.finish = proxy.close


def _relays(
    opts: SandboxOptions,
    attempt: Attempt,
    user: tuple[int, int] | None,
    gateway: str | None,
) -> tuple[HostProxy | None, list[str], list[str]]:
    """The --allow-host proxy (started here, its socket's directory beside the scratch tree) and
    the gateway's socket, handed to `user`: the proxy, the directories the view hides, and the
    (socket, port) pairs the relay inside serves on 127.0.0.1."""
    proxy = None
    hidden: list[str] = []
    pairs: list[str] = []
    if opts.allow_hosts:
        proxy_dir = os.path.join(os.path.dirname(attempt.scratch), "proxy")
        os.makedirs(proxy_dir, exist_ok=True)
        os.chmod(proxy_dir, 0o755)
        proxy = HostProxy(os.path.join(proxy_dir, "sock"), parse_hosts(opts.allow_hosts), user)
        hidden = [proxy_dir]
        pairs += [proxy.path, str(RELAY_PORT)]
    if gateway is not None:
        if user is not None:
            os.chown(gateway, *user)
        hidden.append(os.path.dirname(gateway))
        pairs += [gateway, str(GATEWAY_PORT)]
    return proxy, hidden, pairs


# The --allow-host relay starts first (it listens before it returns), then the generator: `$0`.
RELAY_WRAPPER = (
    'p="$1"; r="$2"; shift 2; '
    '"$p" -I -S -c "$r" "$@" || { echo "genjob: the --allow-host relay did not start" >&2; exit 97; }; '
    'exec sh -c "$0"'
)
