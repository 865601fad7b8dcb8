"""Merging the shared ledgers: union trees (archive, replays) and cat_sort_uniq notes."""

from __future__ import annotations

import pygit2

from git_genjob.store import TREE_MODE, Store


def _union_tree(store: Store, a: pygit2.Tree, b: pygit2.Tree) -> pygit2.Oid:
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
            tb.insert(name, _union_tree(store, ta, tb_), TREE_MODE)
        # Same name, different blobs: content-named files never differ; keep ours.
    return tb.write()


def merge_union(store: Store, local: pygit2.Oid, remote: pygit2.Oid) -> pygit2.Oid:
    """A two-parent commit whose tree is the union of both trees."""
    a, b = store.get_commit(local), store.get_commit(remote)
    tree = _union_tree(store, a.tree, b.tree)
    return store.commit(tree, [local, remote], "genjob: merge\n")


def _flat_notes(store: Store, tree: pygit2.Tree) -> dict[str, pygit2.Oid]:
    return {path.replace("/", ""): oid for path, oid in store.tree_files(tree).items()}


def notes_tree(store: Store, notes: dict[str, pygit2.Oid]) -> pygit2.Oid:
    """A notes tree with git's 2/38 fan-out."""
    return store.build_tree({f"{obj[:2]}/{obj[2:]}": oid for obj, oid in notes.items()})


def cat_sort_uniq(a: bytes, b: bytes) -> bytes:
    lines = sorted(set(a.splitlines()) | set(b.splitlines()))
    return b"\n".join(line for line in lines if line) + b"\n"


def merge_notes(store: Store, local: pygit2.Oid, remote: pygit2.Oid) -> pygit2.Oid:
    mine = _flat_notes(store, store.get_commit(local).tree)
    theirs = _flat_notes(store, store.get_commit(remote).tree)
    for obj, oid in theirs.items():
        if obj not in mine:
            mine[obj] = oid
        elif mine[obj] != oid:
            mine[obj] = store.blob(cat_sort_uniq(store.read(mine[obj]), store.read(oid)))
    return store.commit(notes_tree(store, mine), [local, remote], "genjob: merge notes\n")
