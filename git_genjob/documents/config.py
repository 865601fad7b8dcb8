"""`.genjob/config.toml`: limits, normalizer rules, scratch ignore patterns, hooks policy."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from git_genjob.documents.errors import BadInput

Tree = TypeVar("Tree", contravariant=True)


class ConfigSource(Protocol[Tree]):
    """Where config.toml is read from: the work tree or a commit's tree (a storage Store is one).
    Config is a document: it reads through what it is handed, it never imports the store."""

    def file_at(self, tree: Tree, path: str) -> bytes | None: ...

    def worktree_file(self, path: str) -> bytes | None: ...


DEFAULT_IGNORE = ("__pycache__/", "*.pyc", ".pytest_cache/")

TEMPLATE = """\
# git-genjob repository settings. Committed and reviewed like code.

[limits]
# instruction_bytes = 65536
# allowed_paths = 256
# file_bytes = 16777216
# receipt_bytes = 268435456

[scratch]
# Files a generator may leave outside the allowed paths without rejecting the receipt.
# ignore = ["__pycache__/", "*.pyc", ".pytest_cache/"]
# aider also leaves its chat history and caches (docs/generators.md):
# ignore = ["__pycache__/", "*.pyc", ".pytest_cache/", ".aider*"]

[normalize]
# Extra prompt rewrites for the replay cache fingerprint, applied in order.
# rules = [{ pattern = "build-[0-9]+", replace = "build-N" }]

[commit]
# Disclosure trailer name on applied commits ("Assisted-by"), or "off".
# disclosure = "Assisted-by"

[hooks]
# Command run by the pre-apply hook with GENJOB_OUTPUTS set; non-zero refuses the apply.
# pre_apply = "python -m pytest -q"

[sandbox]
# What an exec generator may see besides its scratch tree (docs/generators.md).
# ro = ["~/.config/io.datasette.llm"]
# rw = []
# allow_net = false
# allow_hosts = ["api.openai.com:443"]
# procs = 512
# memory = "4G"
# file_size = "1G"
# cpu = 3600

[policy]
# Refuse (check 4) a receipt whose generator ran without a sandbox (--no-sandbox, out of band).
# require_sandbox = false
# Per job, through the gateway (work --max-calls / --max-tokens override them):
# max_calls = 200
# max_tokens = 2000000

# An exec generator's model calls go through the worker's gateway to these upstreams; the key
# stays in the worker's environment (work --gateway NAME=URL adds or overrides one).
# [gateway.openai]
# upstream = "https://api.openai.com"
# [gateway.anthropic]
# upstream = "https://api.anthropic.com"
# [gateway.local]
# upstream = "http://127.0.0.1:8080"
# dialect = "openai"
# key_env = "LOCAL_MODEL_KEY"
"""


@dataclass(frozen=True)
class Limits:
    instruction_bytes: int = 64 * 1024
    allowed_paths: int = 256
    file_bytes: int = 16 * 1024 * 1024
    receipt_bytes: int = 256 * 1024 * 1024


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of a sandboxed generator, each per process (setrlimit): tasks of its
    user beyond those running when it starts, data memory, file size, CPU seconds."""

    procs: int = 512
    memory: int = 4 * 1024 * 1024 * 1024
    file_size: int = 1024 * 1024 * 1024
    cpu: int = 3600

    def to_dict(self) -> dict[str, int]:
        return {"procs": self.procs, "memory": self.memory, "file_size": self.file_size, "cpu": self.cpu}


LIMIT_NAMES = ("procs", "memory", "file_size", "cpu")
SANDBOX_MECHANISMS = ("auto", "bwrap", "landlock")


@dataclass(frozen=True)
class SandboxConfig:
    """`[sandbox]`: paths, network and limits for every exec generator of this repository's workers."""

    mechanism: str = "auto"
    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    allow_net: bool = False
    allow_hosts: tuple[str, ...] = ()
    limits: SandboxLimits = field(default_factory=SandboxLimits)


_SIZE = re.compile(r"^(\d+)\s*([KMGT]?)i?B?$", re.I)


def parse_size(value: object, what: str) -> int:
    """A byte count: an integer, or a string such as "512M" or "4G" (powers of 1024)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    m = _SIZE.match(value.strip()) if isinstance(value, str) else None
    if m is None or int(m.group(1)) <= 0:
        raise BadInput(f"{what} must be a positive size such as 512M or 4G, found {value!r}")
    scale: int = 1024 ** " KMGT".index(m.group(2).upper() or " ")
    return int(m.group(1)) * scale


def parse_limit(name: str, value: object, what: str) -> int:
    if name in ("memory", "file_size"):
        return parse_size(value, what)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadInput(f"{what} must be a positive integer, found {value!r}")
    return value


def _strings(section: dict[str, object], name: str) -> tuple[str, ...]:
    value = section.get(name, [])
    if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
        raise BadInput(f".genjob/config.toml: sandbox.{name} must be a list of strings")
    return tuple(value)


def _sandbox(section: dict[str, object]) -> SandboxConfig:
    unknown = set(section) - {"mechanism", "ro", "rw", "allow_net", "allow_hosts", *LIMIT_NAMES}
    if unknown:
        raise BadInput(f".genjob/config.toml: [sandbox] has no setting {sorted(unknown)[0]!r}")
    mechanism = section.get("mechanism", "auto")
    if mechanism not in SANDBOX_MECHANISMS:
        raise BadInput(
            f".genjob/config.toml: sandbox.mechanism must be one of {', '.join(SANDBOX_MECHANISMS)}",
            "run without a sandbox only per worker, with work --no-sandbox",
        )
    allow_net = section.get("allow_net", False)
    if not isinstance(allow_net, bool):
        raise BadInput(".genjob/config.toml: sandbox.allow_net must be true or false")
    d = SandboxLimits()
    limits = SandboxLimits(
        **{n: parse_limit(n, section.get(n, getattr(d, n)), f".genjob/config.toml: sandbox.{n}") for n in LIMIT_NAMES}
    )
    return SandboxConfig(
        str(mechanism), _strings(section, "ro"), _strings(section, "rw"), allow_net,
        _strings(section, "allow_hosts"), limits,
    )  # fmt: skip


@dataclass(frozen=True)
class Config:
    limits: Limits = field(default_factory=Limits)
    scratch_ignore: tuple[str, ...] = DEFAULT_IGNORE
    normalize_rules: tuple[tuple[str, str], ...] = ()
    disclosure: str | None = "Assisted-by"
    pre_apply: str | None = None
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    require_sandbox: bool = False  # [policy]: check 4 refuses a receipt made without a sandbox
    max_calls: int | None = None  # [policy]: the gateway's budgets per job (SPEC §12.1)
    max_tokens: int | None = None
    # [gateway.NAME]: (name, upstream, dialect or None, key_env or None), parsed by worker.gateway
    gateways: tuple[tuple[str, str, str | None, str | None], ...] = ()


_TRAILER = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,63}$")


def _table(doc: dict[str, object], name: str) -> dict[str, object]:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        raise BadInput(
            f".genjob/config.toml: {name} must be a table ([{name}]), found {type(value).__name__}",
            f"write it as a [{name}] section",
        )
    return value


def _int(section: dict[str, object], name: str, default: int) -> int:
    value = section.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadInput(f".genjob/config.toml: {name} must be a positive integer, found {value!r}")
    return value


def parse_config(data: bytes | None) -> Config:
    """Parse config.toml bytes (None: defaults). Malformed input is exit 2."""
    if data is None:
        return Config()
    doc = _load(data)
    limits = _limits(_table(doc, "limits"))
    ignore = _ignore(_table(doc, "scratch"))
    rules = _rules(_table(doc, "normalize"))
    disclosure = _disclosure(_table(doc, "commit"))
    pre_apply = _pre_apply(_table(doc, "hooks"))
    require, max_calls, max_tokens = _policy(_table(doc, "policy"))
    return Config(
        sandbox=_sandbox(_table(doc, "sandbox")),
        require_sandbox=require,
        max_calls=max_calls,
        max_tokens=max_tokens,
        gateways=_gateways(_table(doc, "gateway")),
        limits=limits,
        scratch_ignore=ignore,
        normalize_rules=rules,
        disclosure=disclosure,
        pre_apply=pre_apply,
    )


def _load(data: bytes) -> dict[str, object]:
    """The TOML document, or exit 2 naming the syntax error."""
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f".genjob/config.toml is malformed: {exc}", "fix the file") from None


def _limits(lim: dict[str, object]) -> Limits:
    """`[limits]`: each a positive integer, defaulting to Limits()."""
    d = Limits()
    return Limits(
        _int(lim, "instruction_bytes", d.instruction_bytes),
        _int(lim, "allowed_paths", d.allowed_paths),
        _int(lim, "file_bytes", d.file_bytes),
        _int(lim, "receipt_bytes", d.receipt_bytes),
    )


def _ignore(scratch: dict[str, object]) -> tuple[str, ...]:
    """`scratch.ignore`: a list of strings."""
    ignore = scratch.get("ignore", list(DEFAULT_IGNORE))
    if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
        raise BadInput(".genjob/config.toml: scratch.ignore must be a list of strings")
    return tuple(ignore)


def _rules(normalize: dict[str, object]) -> tuple[tuple[str, str], ...]:
    """`normalize.rules`: (pattern, replace) tables, each with a pattern."""
    raw_rules = normalize.get("rules", [])
    if not isinstance(raw_rules, list):
        raise BadInput(".genjob/config.toml: normalize.rules must be a list of tables")
    rules = []
    for rule in raw_rules:
        if not isinstance(rule, dict) or not isinstance(rule.get("pattern"), str):
            raise BadInput(".genjob/config.toml: normalize.rules entries need a pattern")
        rules.append((rule["pattern"], str(rule.get("replace", ""))))
    return tuple(rules)


def _disclosure(commit: dict[str, object]) -> str | None:
    """`commit.disclosure`: a trailer name, or None for "off", "" or false."""
    disclosure = commit.get("disclosure", "Assisted-by")
    if disclosure is False or disclosure in ("off", ""):
        return None
    if not (isinstance(disclosure, str) and _TRAILER.match(disclosure)):
        raise BadInput(
            f'.genjob/config.toml: commit.disclosure must be a trailer name or "off", found {disclosure!r}',
            'e.g. disclosure = "Assisted-by"',
        )
    return disclosure


def _pre_apply(hooks: dict[str, object]) -> str | None:
    """`hooks.pre_apply`: a command string (empty: none)."""
    pre_apply = hooks.get("pre_apply")
    if pre_apply is not None and not isinstance(pre_apply, str):
        raise BadInput(".genjob/config.toml: hooks.pre_apply must be a command string")
    return str(pre_apply) if pre_apply else None


def _policy(policy: dict[str, object]) -> tuple[bool, int | None, int | None]:
    """`[policy]`: (require_sandbox, max_calls, max_tokens)."""
    unknown = set(policy) - {"require_sandbox", "max_calls", "max_tokens"}
    if unknown:
        raise BadInput(f".genjob/config.toml: [policy] has no setting {sorted(unknown)[0]!r}")
    require = policy.get("require_sandbox", False)
    if not isinstance(require, bool):
        raise BadInput(".genjob/config.toml: policy.require_sandbox must be true or false")
    return require, _budget(policy, "max_calls"), _budget(policy, "max_tokens")


def _budget(policy: dict[str, object], name: str) -> int | None:
    value = policy.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise BadInput(f".genjob/config.toml: policy.{name} must be a count (0 or more), found {value!r}")
    return value


LOOPBACK = re.compile(r"^http://(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?(/|\Z)")


def in_the_clear(url: str) -> bool:
    """Whether a key sent to `url` would cross a network unencrypted: neither https:// nor plain
    http:// to this machine's loopback (a committed upstream, `ci init --gateway`)."""
    return not (url.startswith("https://") or LOOPBACK.match(url))


def _gateways(section: dict[str, object]) -> tuple[tuple[str, str, str | None, str | None], ...]:
    """`[gateway.NAME]` tables. The worker sends its key to `upstream`, so a committed one must be
    https (or plain http to this machine's loopback): a key never crosses a network in the clear."""
    return tuple(_gateway(name, table) for name, table in section.items())


def _gateway(name: str, table: object) -> tuple[str, str, str | None, str | None]:
    """One `[gateway.NAME]` table as (name, upstream, dialect, key_env), each setting checked."""
    where = f".genjob/config.toml: [gateway.{name}]"
    if not isinstance(table, dict) or not name.isidentifier():
        raise BadInput(f"{where} must be a table named by an identifier", "e.g. [gateway.openai]")
    unknown = set(table) - {"upstream", "dialect", "key_env"}
    if unknown:
        raise BadInput(f"{where} has no setting {sorted(unknown)[0]!r}", "settings: upstream, dialect, key_env")
    upstream, dialect, key_env = table.get("upstream"), table.get("dialect"), table.get("key_env")
    if not isinstance(upstream, str) or in_the_clear(upstream):
        raise BadInput(
            f"{where}: upstream must be an https:// URL (or http:// to 127.0.0.1), found {upstream!r}",
            'e.g. upstream = "https://api.openai.com"',
        )
    _check_dialect_and_key_env(where, dialect, key_env)
    return (name, upstream, dialect, key_env)


def _check_dialect_and_key_env(where: str, dialect: object, key_env: object) -> None:
    """A gateway's optional settings: a dialect genjob speaks, a key_env that names a variable."""
    if dialect is not None and dialect not in ("openai", "anthropic"):
        raise BadInput(f"{where}: dialect must be openai or anthropic, found {dialect!r}")
    if key_env is not None and not (isinstance(key_env, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env)):
        raise BadInput(f"{where}: key_env must be an environment variable name, found {key_env!r}")


_PARSED: dict[bytes, Config] = {}  # config.toml's bytes -> its Config (a value; bytes never change meaning)


def read_config(store: ConfigSource[Tree], tree: Tree | None = None) -> Config:
    """config.toml from the work tree (default) or from a commit's tree."""
    name = ".genjob/config.toml"
    data = store.file_at(tree, name) if tree is not None else store.worktree_file(name)  # sparse: the index's
    if data is None:
        return Config()
    hit = _PARSED.get(data)
    if hit is None:
        if len(_PARSED) > 64:
            _PARSED.clear()
        hit = _PARSED[data] = parse_config(data)
    return hit
