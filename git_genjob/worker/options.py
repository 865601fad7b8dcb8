"""The worker's configuration resolved from `work`'s options over `.genjob/config.toml` (issue 36
step 5): the lease's bound, the sandbox (`[sandbox]` with the options on top, the paths no view
may hold), and the gateway's upstreams and budgets. Each is refused (BadInput, exit 2) before
any claim; `cli/work.py` parses, resolves here, runs and renders."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from git_genjob.documents.config import LIMIT_NAMES, Config, SandboxConfig, parse_limit
from git_genjob.documents.errors import BadInput
from git_genjob.documents.states import MAX_LEASE_S
from git_genjob.worker.gateway.dialects import Upstream, parse_gateway
from git_genjob.worker.generators.sandbox.options import SandboxOptions
from git_genjob.worker.generators.sandbox.paths import check_guarded, program_paths

if TYPE_CHECKING:
    from git_genjob.storage.store import Store


def check_lease(lease_s: float, given: str) -> None:
    """A lease is longer than 0 and no longer than the longest a worker takes (SPEC §4)."""
    if not 0 < lease_s <= MAX_LEASE_S:
        raise BadInput(
            f"--lease {given} is not between 0 and {MAX_LEASE_S / 3600:g}h", "a lease is renewed every third"
        )


def sandbox_options(
    cfg: SandboxConfig,
    ro: tuple[str, ...],
    rw: tuple[str, ...],
    allow_net: bool,
    allow_hosts: tuple[str, ...],
    limits: tuple[str, ...],
    no_sandbox: bool,
) -> SandboxOptions:
    """`[sandbox]` of .genjob/config.toml, then this worker's options on top."""
    base = SandboxOptions.from_config(cfg)
    changed = {}
    for item in limits:
        name, eq, value = item.partition("=")
        if not eq or name not in LIMIT_NAMES:
            raise BadInput(f"--sandbox-limit {item!r}", f"use NAME=VALUE with NAME one of {', '.join(LIMIT_NAMES)}")
        changed[name] = parse_limit(name, value, f"--sandbox-limit {name}")
    return dataclasses.replace(
        base,
        mechanism="none" if no_sandbox else base.mechanism,
        ro=base.ro + ro,
        rw=base.rw + rw,
        allow_net=base.allow_net or allow_net,
        allow_hosts=base.allow_hosts + allow_hosts,
        limits=dataclasses.replace(base.limits, **changed),
    )


def guarded(sandbox: SandboxOptions, store: Store, key_path: str | None, spec: str) -> SandboxOptions:
    """`sandbox` guarding the repository and the worker's key: an exec generator's program
    whose view would hold either is refused here, before any claim."""
    paths = [store.workdir, store.common_dir, os.path.expanduser(key_path) if key_path else None]
    sandbox = dataclasses.replace(sandbox, guarded=tuple(p for p in paths if p))
    if spec.startswith("exec:") and sandbox.mechanism != "none":  # refused before any claim
        check_guarded(sandbox, program_paths(spec[5:], os.environ.get("PATH", os.defpath)))
    return sandbox


def gateway_upstreams(
    config: Config,
    gateways: tuple[str, ...],
    pass_env: tuple[str, ...],
    max_calls: int | None,
    max_tokens: int | None,
) -> tuple[tuple[Upstream, ...], int | None, int | None]:
    """The gateway's upstreams (`[gateway]` of the config file, each `--gateway` overriding its
    URL and keeping its dialect and key_env) and the per-job budgets. An upstream's key in
    --pass-env is refused: the key stays with the worker (SPEC §12.1)."""
    upstreams = tuple(_named_upstreams(config, gateways).values())
    max_calls = config.max_calls if max_calls is None else max_calls
    max_tokens = config.max_tokens if max_tokens is None else max_tokens
    leaked = sorted({u.key_env for u in upstreams} & set(pass_env))
    if leaked:  # refused before any claim: the key stays with the worker (SPEC §12.1)
        raise BadInput(
            f"--pass-env {leaked[0]} would hand the gateway's key to the generator",
            "drop it: the generator gets a token for its attempt in that variable, the gateway adds the key",
        )
    return upstreams, max_calls, max_tokens


def _named_upstreams(config: Config, gateways: tuple[str, ...]) -> dict[str, Upstream]:
    """The config file's upstreams by name, then each --gateway's (one the file names keeps its dialect and key_env)."""
    named = {name: parse_gateway(f"{name}={url}", dialect, key_env) for name, url, dialect, key_env in config.gateways}
    for text in gateways:  # --gateway overrides the file's URL, keeping its dialect and key_env
        known = named.get(text.partition("=")[0].strip())
        up = parse_gateway(text, known.dialect if known else None, known.key_env if known else None)
        named[up.name] = up
    return named
