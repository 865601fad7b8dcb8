"""Merging the shared ledgers kept as union trees: the archive and the replay cache (notes: notes.py)."""

from __future__ import annotations

import pygit2

from git_genjob.store import ROWS_DIR, TREE_MODE, Store, parse_rows, rows_blob


def _union_tree(store: Store, a: pygit2.Tree, b: pygit2.Tree, path: str = "") -> pygit2.Oid:
    tb = store.repo.TreeBuilder(a)
    for entry in b:
        name = str(entry.name)
        if name not in a:
            tb.insert(name, entry.id, entry.filemode)
            continue
        mine = a[name]
        if mine.id == entry.id:
            continue
        ta, tb_ = store.repo.get(mine.id), store.repo.get(entry.id)
        if isinstance(ta, pygit2.Tree) and isinstance(tb_, pygit2.Tree):
            tb.insert(name, _union_tree(store, ta, tb_, f"{path}{name}/"), TREE_MODE)
        elif path == f"{ROWS_DIR}/" and isinstance(ta, pygit2.Blob) and isinstance(tb_, pygit2.Blob):
            # The archive's status rows of one shard: both sides' lines (ours for a key both
            # have); a line that names another tree than the merged entry is ignored by readers.
            lines = {**parse_rows(tb_.data)[1], **parse_rows(ta.data)[1]}
            tb.insert(name, store.blob(rows_blob(lines, None)), entry.filemode)  # vouches for no tree
        # Same name, different blobs: content-named files never differ; keep ours.
    return tb.write()


def merge_union(store: Store, local: pygit2.Oid, remote: pygit2.Oid) -> pygit2.Oid:
    """A two-parent commit whose tree is the union of both trees."""
    a, b = store.get_commit(local), store.get_commit(remote)
    tree = _union_tree(store, a.tree, b.tree)
    return store.commit(tree, [local, remote], "genjob: merge\n")
