"""Editing the trust store: .genjob/allowed_signers and .genjob/revoked_keys in the work tree;
the planner's key; check 9 (whether a trusted planner signed a job)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from git_genjob.documents.errors import BadInput, GenjobError
from git_genjob.documents.job import job_signer
from git_genjob.documents.keys import (
    ROLES,
    TrustedKey,
    default_key_path,
    fingerprint,
    generate,
    normalize_validity,
    parse_allowed_signers,
    parse_public_key,
    parse_revoked,
    public_line,
    read_signing_key,
    verify_signature,
    write_key_files,
)
from git_genjob.documents.keys import trust_line as make_line
from git_genjob.documents.receipt import PAYLOAD_TYPE
from git_genjob.documents.signing import pae
from git_genjob.planner.userfiles import write_atomic
from git_genjob.storage.store import Store
from git_genjob.storage.truststore import TrustStore, trust_at_head, trust_from_tree

__all__ = ["TrustStore", "trust_at_head", "trust_from_tree"]


def genjob_file(store: Store, name: str) -> str:
    """The path of `.genjob/NAME` in the work tree, to write (refused where a sparse checkout
    leaves it out: appending there would drop every line the index holds)."""
    if store.workdir is None:
        raise BadInput("the trust store lives in the work tree", "run this in a clone with a work tree")
    if store.skip_worktree([f".genjob/{name}"]):
        raise BadInput(
            f".genjob/{name} is outside this sparse checkout, so it is not in the work tree to edit",
            "add it to the checkout first: git sparse-checkout add .genjob",
        )
    return os.path.join(store.workdir, ".genjob", name)


def store_text(store: Store, name: str) -> str:
    """`.genjob/NAME` as git sees it (from the index where a sparse checkout leaves it out)."""
    if store.workdir is None:
        raise BadInput("the trust store lives in the work tree", "run this in a clone with a work tree")
    data = store.worktree_file(f".genjob/{name}")
    return data.decode("utf-8") if data is not None else ""


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return ""


def append_lines(path: str, lines: list[str]) -> None:
    current = read_text(path)
    write_atomic(
        path, current + ("" if current.endswith("\n") or not current else "\n") + "".join(f"{x}\n" for x in lines)
    )


def _key_text(pubkey: str) -> str:
    """KEY as `trust add` takes it: a .pub file's text, or a public key line itself."""
    if os.path.isfile(pubkey):
        return read_text(pubkey)
    if os.path.isdir(pubkey):
        raise BadInput(f"{pubkey} is a directory, not a public key file", "give the path of a .pub file")
    if _meant_as_a_file(pubkey):
        raise BadInput(
            f"no such file: {pubkey}",
            "give the path of the worker's .pub file (git genjob keygen wrote it beside the key), "
            "or the public key line itself in quotes",
        )
    return pubkey


def _meant_as_a_file(pubkey: str) -> bool:
    """Whether KEY, which names no file, was meant as a path: not a key line, and a .pub name,
    a path or a single word."""
    if pubkey.lstrip().startswith(("ssh-", "sk-", "ecdsa-")):
        return False
    return pubkey.endswith(".pub") or os.sep in pubkey or not any(c.isspace() for c in pubkey.strip())


def add(
    store: Store,
    name: str,
    pubkey: str,
    valid_before: str | None,
    valid_after: str | None,
    roles: tuple[str, ...] = ("worker",),
) -> dict[str, Any]:
    """Trust `pubkey` (a line, or a .pub file) as `name` for the namespaces of `roles`."""
    if not _one_word(name):
        raise BadInput(f"signer name {name!r} must be one word")
    pk, _ = parse_public_key(_key_text(pubkey))
    path = genjob_file(store, "allowed_signers")
    namespaces = tuple(dict.fromkeys(ns for role in roles for ns in ROLES[role]))
    if _already_trusted(read_text(path), name, pk, namespaces):
        return {"name": name, "added": False}
    line = make_line(
        name,
        pk,
        valid_before and normalize_validity(valid_before),
        valid_after and normalize_validity(valid_after),
        namespaces,
    )
    append_lines(path, [line])
    return {"name": name, "added": True, "line": line}


def _one_word(name: str) -> bool:
    """Whether `name` can be a principal of allowed_signers: one word, not a comment."""
    return bool(name) and not any(c.isspace() for c in name) and not name.startswith("#")


def _already_trusted(text: str, name: str, pk: bytes, namespaces: tuple[str, ...]) -> bool:
    """Whether allowed_signers `text` already trusts `pk` as `name` for all of `namespaces`."""
    known = [k for k in parse_allowed_signers(text) if k.public == pk and k.principal == name]
    return any(set(namespaces) <= set(k.namespaces or ()) for k in known)


def listing(store: Store) -> list[dict[str, Any]]:
    keys = parse_allowed_signers(store_text(store, "allowed_signers"))
    revoked = parse_revoked(store_text(store, "revoked_keys"))
    return [
        {
            "name": k.principal,
            "keyid": k.keyid,
            "namespaces": list(k.namespaces or []),
            "valid_after": k.valid_after,
            "valid_before": k.valid_before,
            "revoked": k.public in revoked,
        }
        for k in keys
    ]


def revoke(store: Store, name: str) -> int:
    """Add every key trusted as `name` to revoked_keys; returns how many were new."""
    keys = [k for k in parse_allowed_signers(read_text(genjob_file(store, "allowed_signers"))) if k.principal == name]
    if not keys:
        raise BadInput(f"no trusted key named {name}", "see: git genjob trust list")
    path = genjob_file(store, "revoked_keys")
    revoked = parse_revoked(read_text(path))
    added = [public_line(k.public, name) for k in keys if k.public not in revoked]
    if added:
        append_lines(path, added)
    return len(added)


def untrusted_hint(envelope: Any) -> str | None:
    """The exact `trust add` for an unknown signer, when its public key is on this machine.

    The receipt's `keyid` is unsigned, so it is only quoted: a local `.pub` file is named only
    when its key verifies the signature itself.
    """
    local = _local_signer(envelope)
    if local is not None:
        path, pk, name = local
        return (
            f"the receipt is signed by {path} ({fingerprint(pk)}), which .genjob/allowed_signers does not "
            f"trust; if you trust that worker: git genjob trust add {name} {path}, then commit .genjob/"
        )
    named = ", ".join(repr(k) for k, _ in envelope.signatures if k)[:200] or "no key id"
    return (
        f"the receipt names signer {named} (unverified); if you trust that worker, get its public key "
        "line (its KEY.pub) and run: git genjob trust add NAME KEY.pub, then commit .genjob/"
    )


def _local_signer(envelope: Any) -> tuple[str, bytes, str] | None:
    """(path, key, name) of the first `.pub` file beside this machine's keys whose key verifies
    one of the envelope's signatures; the name is the key's comment, else the file's."""
    import glob

    message = pae(PAYLOAD_TYPE, envelope.payload)
    for path in sorted(glob.glob(os.path.join(os.path.dirname(default_key_path("x")), "*.pub"))):
        try:
            pk, comment = parse_public_key(read_text(path))
        except (BadInput, OSError, UnicodeDecodeError):
            continue
        if any(verify_signature(pk, message, sig) for _, sig in envelope.signatures):
            return path, pk, comment.split()[0] if comment.split() else os.path.basename(path)[: -len(".pub")]
    return None


def trust_from_worktree(store: Store) -> TrustStore:
    """`.genjob/` of the apply host's work tree (HEAD's tree in a bare repository)."""
    if store.workdir is None:
        head = store.head_commit()
        return trust_from_tree(store, head.tree if head else None)

    def read(name: str) -> str:
        data = store.worktree_file(f".genjob/{name}")  # a sparse checkout's from the index
        return data.decode("utf-8") if data is not None else ""

    return TrustStore.from_text(read("allowed_signers"), read("revoked_keys"))


def worker_trust(store: Store, trust_file: str | None = None) -> TrustStore:
    """The trust store a worker checks planners against (check 9 before a claim): `trust_file`
    when given, else the work tree's .genjob/, else HEAD's (a clone without a work tree)."""
    if trust_file:
        try:
            with open(os.path.expanduser(trust_file), encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise BadInput(f"cannot read --allowed-signers {trust_file}: {exc.strerror}") from None
        return TrustStore.from_text(text, "")
    here = trust_from_worktree(store)
    if here.signers or store.workdir is None:
        return here
    head = store.head_commit()
    return trust_from_tree(store, head.tree) if head is not None else here


def worker_trust_missing(store: Store) -> bool:
    """Whether no `.genjob/allowed_signers` is there to read at all (neither in the work tree nor
    on HEAD: a stale clone, or no branch checked out), as opposed to one that trusts nobody."""
    if store.worktree_file(".genjob/allowed_signers") is not None:
        return False
    head = store.head_commit()
    return head is None or store.file_at(head.tree, ".genjob/allowed_signers") is None


def missing_trust_error() -> BadInput:
    """What a worker says in a checkout with no trust store (SPEC §12.4)."""
    return BadInput(
        "the trust store .genjob/allowed_signers is missing from this checkout (not in the work tree, not on "
        "HEAD): no job's planner can be checked, so none was claimed",
        "get the branch that holds .genjob/ (git pull, or git checkout main), or pass --allowed-signers FILE "
        "(or git config genjob.allowedSigners FILE); in a project without one yet: git genjob init; "
        "git genjob doctor",
    )


@dataclass(frozen=True)
class JobTrust:
    """Whether a stored job passes check 9: `trusted`, `unsigned` or `untrusted` (with why)."""

    label: str
    detail: str
    signer: TrustedKey | None = None

    @property
    def ok(self) -> bool:
        return self.label == "trusted"


def job_trust(job_bytes: bytes, envelope: bytes | None, trust: TrustStore, when: float | None = None) -> JobTrust:
    """Check 9 of SPEC §11 against `trust`, as a label `status` can show and a worker can act on."""
    import time

    if envelope is None:
        return JobTrust("unsigned", "the job carries no planner signature")
    try:
        key = job_signer(job_bytes, envelope, trust.signers, trust.revoked, time.time() if when is None else when)
    except GenjobError as exc:
        return JobTrust("untrusted", exc.message)
    return JobTrust("trusted", f"planned by {key.principal} ({key.keyid})", key)


PLANNER_KEY_CONFIG = "genjob.plannerKey"


def planner_key_path(store: Store) -> tuple[str, bool]:
    """(path of the planner's signing key, whether git config names it): `git config
    genjob.plannerKey`, else `$XDG_CONFIG_HOME/git-genjob/keys/planner`, which `init` creates."""
    configured = store.config_get(PLANNER_KEY_CONFIG)
    if configured:
        return os.path.expanduser(configured), True
    return default_key_path("planner"), False


def planner_key(store: Store, given: str | None = None) -> Any:
    """The key `submit` and `drop` sign with: --signing-key, else the configured or default
    planner key; None when none is configured and the default does not exist (unsigned)."""
    if given:
        return read_signing_key(os.path.expanduser(given))
    path, configured = planner_key_path(store)
    if not configured and not os.path.exists(path):
        return None
    return read_signing_key(path)


def ensure_planner(store: Store) -> list[str]:
    """`init`'s part of SPEC §11: this user's planner key (created once, 0600, outside the
    repository) and its line in the work tree's .genjob/allowed_signers for genjob-job and
    genjob-review. Returns what it did, one line each."""
    done = _create_planner_key(store)
    key = planner_key(store)
    signers = genjob_file(store, "allowed_signers")
    trusted = parse_allowed_signers(read_text(signers))
    if not any(k.public == key.public and k.namespaces and "genjob-job" in k.namespaces for k in trusted):
        email = store.config_get("user.email") or ""
        name = email if _one_word(email) else "planner"
        append_lines(signers, [make_line(name, key.public, None, namespaces=ROLES["planner"])])
        done.append(f"trusted {name} ({key.keyid}) as a planner in .genjob/allowed_signers")
    return done


def _create_planner_key(store: Store) -> list[str]:
    """The planner key file, created (0600) unless it exists; a configured path must exist."""
    path, configured = planner_key_path(store)
    if os.path.exists(path):
        return []
    if configured:
        raise BadInput(f"git config {PLANNER_KEY_CONFIG} names {path}, which does not exist", "fix the setting")
    sig_email = store.config_get("user.email") or "planner"
    write_key_files(generate(f"planner {sig_email}"), path)
    return [f"created planner key {path} (signs the jobs you submit)"]
