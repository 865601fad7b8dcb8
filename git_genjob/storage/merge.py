"""Merging the shared ledgers kept as union trees: the archive and the replay cache (notes: notes.py)."""

from __future__ import annotations

import pygit2

from git_genjob.storage.store import Store


def merge_union(store: Store, local: pygit2.Oid, remote: pygit2.Oid) -> pygit2.Oid:
    """A two-parent commit whose tree is the union of both trees."""
    a, b = store.get_commit(local), store.get_commit(remote)
    tree = store.union_tree(a.tree, b.tree)
    return store.commit(tree, [local, remote], "genjob: merge\n")
