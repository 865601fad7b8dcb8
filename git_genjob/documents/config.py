"""`.genjob/config.toml`: limits, normalizer rules, scratch ignore patterns, hooks policy."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from git_genjob.documents.errors import BadInput

if TYPE_CHECKING:  # config is a document: it reads through a store, it never imports one
    import pygit2

    from git_genjob.storage.store import Store

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

[normalize]
# Extra prompt rewrites for the replay cache fingerprint, applied in order.
# rules = [{ pattern = "build-[0-9]+", replace = "build-N" }]

[commit]
# Disclosure trailer name on applied commits ("Assisted-by"), or "off".
# disclosure = "Assisted-by"

[hooks]
# Command run by the pre-apply hook with GENJOB_OUTPUTS set; non-zero refuses the apply.
# pre_apply = "python -m pytest -q"
"""


@dataclass(frozen=True)
class Limits:
    instruction_bytes: int = 64 * 1024
    allowed_paths: int = 256
    file_bytes: int = 16 * 1024 * 1024
    receipt_bytes: int = 256 * 1024 * 1024


@dataclass(frozen=True)
class Config:
    limits: Limits = field(default_factory=Limits)
    scratch_ignore: tuple[str, ...] = DEFAULT_IGNORE
    normalize_rules: tuple[tuple[str, str], ...] = ()
    disclosure: str | None = "Assisted-by"
    pre_apply: str | None = None


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
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f".genjob/config.toml is malformed: {exc}", "fix the file") from None
    lim = _table(doc, "limits")
    d = Limits()
    limits = Limits(
        _int(lim, "instruction_bytes", d.instruction_bytes),
        _int(lim, "allowed_paths", d.allowed_paths),
        _int(lim, "file_bytes", d.file_bytes),
        _int(lim, "receipt_bytes", d.receipt_bytes),
    )
    ignore = _table(doc, "scratch").get("ignore", list(DEFAULT_IGNORE))
    if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
        raise BadInput(".genjob/config.toml: scratch.ignore must be a list of strings")
    rules = []
    raw_rules = _table(doc, "normalize").get("rules", [])
    if not isinstance(raw_rules, list):
        raise BadInput(".genjob/config.toml: normalize.rules must be a list of tables")
    for rule in raw_rules:
        if not isinstance(rule, dict) or not isinstance(rule.get("pattern"), str):
            raise BadInput(".genjob/config.toml: normalize.rules entries need a pattern")
        rules.append((rule["pattern"], str(rule.get("replace", ""))))
    disclosure = _table(doc, "commit").get("disclosure", "Assisted-by")
    if disclosure is not False and not (
        isinstance(disclosure, str) and (disclosure in ("off", "") or _TRAILER.match(disclosure))
    ):
        raise BadInput(
            f'.genjob/config.toml: commit.disclosure must be a trailer name or "off", found {disclosure!r}',
            'e.g. disclosure = "Assisted-by"',
        )
    pre_apply = _table(doc, "hooks").get("pre_apply")
    if pre_apply is not None and not isinstance(pre_apply, str):
        raise BadInput(".genjob/config.toml: hooks.pre_apply must be a command string")
    return Config(
        limits=limits,
        scratch_ignore=tuple(ignore),
        normalize_rules=tuple(rules),
        disclosure=None if disclosure in ("off", "", False) else str(disclosure),
        pre_apply=str(pre_apply) if pre_apply else None,
    )


def read_config(store: Store, tree: pygit2.Tree | None = None) -> Config:
    """config.toml from the work tree (default) or from a commit's tree."""
    if tree is not None:
        return parse_config(store.file_at(tree, ".genjob/config.toml"))
    data = store.worktree_file(".genjob/config.toml")  # a sparse checkout's from the index
    return parse_config(data) if data is not None else Config()
