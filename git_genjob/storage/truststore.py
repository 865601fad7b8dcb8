"""The trust store as a value: `.genjob/allowed_signers` and `.genjob/revoked_keys` parsed, read
from a tree (a commit's, HEAD's). Every plane that checks a signature reads it through here."""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from git_genjob.documents.keys import TrustedKey, parse_revoked, read_allowed_signers
from git_genjob.storage.store import Store


@dataclass(frozen=True)
class TrustStore:
    signers: list[TrustedKey]
    revoked: set[bytes]
    problems: tuple[str, ...] = ()

    def fingerprint(self) -> str:
        """A digest of what this store trusts (for caches of verdicts made against it)."""
        import hashlib

        keys = sorted((k.principal, k.public.hex(), k.namespaces, k.valid_after, k.valid_before) for k in self.signers)
        return hashlib.sha256(repr((keys, sorted(self.revoked))).encode()).hexdigest()[:32]

    @classmethod
    def from_text(cls, allowed_signers: str, revoked_keys: str) -> TrustStore:
        key = (allowed_signers, revoked_keys)
        hit = _PARSED.get(key)
        if hit is None:  # every command step reads the same two files: parse them once
            signers, problems = read_allowed_signers(allowed_signers)
            if len(_PARSED) > 16:
                _PARSED.clear()
            hit = _PARSED[key] = cls(signers, parse_revoked(revoked_keys), tuple(problems))
        return hit


_PARSED: dict[tuple[str, str], TrustStore] = {}  # read-only values: nothing edits a store's lists


def trust_from_tree(store: Store, tree: pygit2.Tree | None) -> TrustStore:
    def read(name: str) -> str:
        data = store.file_at(tree, f".genjob/{name}") if tree is not None else None
        return data.decode("utf-8", "replace") if data else ""

    return TrustStore.from_text(read("allowed_signers"), read("revoked_keys"))


def trust_at_head(store: Store) -> TrustStore:
    """The trust store committed on HEAD (empty on an unborn branch)."""
    head = store.head_commit()
    return trust_from_tree(store, head.tree if head is not None else None)
