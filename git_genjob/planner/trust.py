"""Editing the trust store: .genjob/allowed_signers and .genjob/revoked_keys in the work tree."""

from __future__ import annotations

import os
from typing import Any

from git_genjob.documents.errors import BadInput
from git_genjob.documents.keys import (
    fingerprint,
    normalize_validity,
    parse_allowed_signers,
    parse_public_key,
    parse_revoked,
    public_line,
)
from git_genjob.documents.keys import trust_line as make_line
from git_genjob.planner.userfiles import write_atomic
from git_genjob.storage.store import Store


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
    if not pubkey.lstrip().startswith(("ssh-", "sk-", "ecdsa-")) and (
        pubkey.endswith(".pub") or os.sep in pubkey or not any(c.isspace() for c in pubkey.strip())
    ):
        raise BadInput(
            f"no such file: {pubkey}",
            "give the path of the worker's .pub file (git genjob keygen wrote it beside the key), "
            "or the public key line itself in quotes",
        )
    return pubkey


def add(store: Store, name: str, pubkey: str, valid_before: str | None, valid_after: str | None) -> dict[str, Any]:
    """Trust `pubkey` (a line, or a .pub file) as `name` for the genjob-receipt namespace."""
    if not name or any(c.isspace() for c in name) or name.startswith("#"):
        raise BadInput(f"signer name {name!r} must be one word")
    pk, _ = parse_public_key(_key_text(pubkey))
    path = genjob_file(store, "allowed_signers")
    if any(k.public == pk and k.principal == name for k in parse_allowed_signers(read_text(path))):
        return {"name": name, "added": False}
    line = make_line(
        name, pk, valid_before and normalize_validity(valid_before), valid_after and normalize_validity(valid_after)
    )
    append_lines(path, [line])
    return {"name": name, "added": True, "line": line}


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
    import glob

    from git_genjob.documents.keys import default_key_path, verify_signature
    from git_genjob.documents.receipt import PAYLOAD_TYPE, pae

    message = pae(PAYLOAD_TYPE, envelope.payload)
    for path in sorted(glob.glob(os.path.join(os.path.dirname(default_key_path("x")), "*.pub"))):
        try:
            pk, comment = parse_public_key(read_text(path))
        except (BadInput, OSError, UnicodeDecodeError):
            continue
        if any(verify_signature(pk, message, sig) for _, sig in envelope.signatures):
            name = comment.split()[0] if comment.split() else os.path.basename(path)[: -len(".pub")]
            return (
                f"the receipt is signed by {path} ({fingerprint(pk)}), which .genjob/allowed_signers does not "
                f"trust; if you trust that worker: git genjob trust add {name} {path}, then commit .genjob/"
            )
    named = ", ".join(repr(k) for k, _ in envelope.signatures if k)[:200] or "no key id"
    return (
        f"the receipt names signer {named} (unverified); if you trust that worker, get its public key "
        "line (its KEY.pub) and run: git genjob trust add NAME KEY.pub, then commit .genjob/"
    )
