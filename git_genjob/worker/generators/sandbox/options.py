"""The sandbox's values: what the worker's owner asked for (`SandboxOptions`), the paths of one
attempt (`Attempt`), how to start its generator (`Launch`) and the receipt's record of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar, cast

from git_genjob.documents.config import SandboxConfig, SandboxLimits

P = TypeVar("P")


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


@dataclass(frozen=True)
class View:
    """What one launch shows and runs, for either mechanism: `argv`, the attempt's directories,
    the paths shown read-only (`ro`: the owner's, the programs' found on PATH (`auto`, also
    named in the receipt) and the relays' hidden ones) and read-write (`rw`), the generator's
    user (None: this worker's own), its resource limits, and whether a relay runs inside
    (--allow-host, the gateway: it needs the namespace's loopback)."""

    argv: list[str]
    attempt: Attempt
    ro: list[str]
    rw: list[str]
    user: tuple[int, int] | None
    limits: list[tuple[int, int]]
    auto: list[str]
    relay: bool = False
