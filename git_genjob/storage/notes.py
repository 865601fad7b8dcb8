"""refs/notes/genjob and refs/notes/genjob-receipts: read, write and merge notes, by path in a
fanned-out tree (SPEC §3, §11).

Since SPEC §11 refs/notes/genjob holds only the human summary of an applied commit (what
`git log` shows) and refs/notes/genjob-receipts the JSON line with its receipt envelope. A note
written before the split holds both in refs/notes/genjob: `receipt_note` reads both refs, so such
a commit keeps verifying.

A note is found and written by path: git's notes trees fan out at any depth (`ab/cdef…`,
`ab/cd/ef…`) or not at all, so a lookup descends two hex digits at a time and a write
rebuilds only the trees on that path. Cost is proportional to the fan-out depth, never to the
number of notes. Only a merge of two diverged notes refs reads every note.
"""

from __future__ import annotations

from collections.abc import Iterable

import pygit2

from git_genjob.storage.layout import NOTES_REF, NOTES_REFS, RECEIPTS_REF
from git_genjob.storage.store import RefUpdate, Store, lookup, retry_cas


def cat_sort_uniq(a: bytes, b: bytes) -> bytes:
    lines = sorted(set(a.splitlines()) | set(b.splitlines()))
    return b"\n".join(line for line in lines if line) + b"\n"


def note_path(tree: pygit2.Tree | None, obj: str) -> str | None:
    """Where the note on `obj` (hex) sits in a notes tree, whatever its fan-out, or None."""
    prefix, rest = "", obj
    node: pygit2.Tree | None = tree
    while node is not None and rest:
        entry = lookup(node, rest)
        if entry is not None and entry.type_str == "blob":
            return prefix + rest
        sub = lookup(node, rest[:2]) if len(rest) > 2 else None
        node = sub if isinstance(sub, pygit2.Tree) else None
        prefix, rest = prefix + rest[:2] + "/", rest[2:]
    return None


def _tree(store: Store, tip: pygit2.Oid | None) -> pygit2.Tree | None:
    return store.get_commit(tip).tree if tip is not None else None


def note_blobs(store: Store, commits: Iterable[pygit2.Oid | str], refs: Iterable[str] = NOTES_REFS) -> list[pygit2.Oid]:
    """The blob ids of the genjob notes (summary and receipt) on `commits`, nothing read."""
    names = [str(c) for c in commits]
    out = []
    for ref in refs:
        tree = _tree(store, store.ref_target(ref))
        out += _blobs_in(tree, names) if tree is not None else []
    return out


def _blobs_in(tree: pygit2.Tree, commits: list[str]) -> list[pygit2.Oid]:
    """The blob ids of the notes on `commits` in one notes tree."""
    paths = [note_path(tree, c) for c in commits]
    entries = [lookup(tree, p) for p in paths if p is not None]
    return [e.id for e in entries if e is not None]


def read_note(store: Store, commit: pygit2.Oid | str, ref: str = NOTES_REF) -> bytes | None:
    """The note on `commit` in `ref` (default: the summary), or None (a few tree lookups)."""
    tree = _tree(store, store.ref_target(ref))
    path = note_path(tree, str(commit))
    if tree is None or path is None:
        return None
    entry = lookup(tree, path)
    return store.read(entry.id) if entry is not None else None


def receipt_note(store: Store, commit: pygit2.Oid | str) -> tuple[str, bytes] | None:
    """(the ref it was read from, the note) holding `commit`'s receipt envelope: the note in
    refs/notes/genjob-receipts, else a note from before the split, which carried its envelope in
    refs/notes/genjob. The caller picks the envelope line (verify.note_envelope)."""
    for ref in (RECEIPTS_REF, NOTES_REF):
        note = read_note(store, commit, ref)
        if note is not None and b'"envelope"' in note:
            return ref, note
    return None


def write_note(store: Store, commit: pygit2.Oid, text: bytes, ref: str = NOTES_REF, replace: bool = False) -> None:
    """Add or extend the note on `commit` in `ref` (lines merged as cat_sort_uniq), moved by CAS;
    `replace` writes `text` as the whole note (a summary is a rendering, never a union)."""

    def attempt() -> None:
        tip = store.ref_target(ref)
        tree = _tree(store, tip)
        obj = str(commit)
        path = note_path(tree, obj)
        new_text = text
        if path is not None and tree is not None:
            old = store.read(lookup(tree, path).id)  # type: ignore[union-attr]
            if old == text or (
                not replace and (text in old or all(line in old.splitlines() for line in text.splitlines()))
            ):
                return
            new_text = text if replace else cat_sort_uniq(old, text)
        else:
            path = f"{obj[:2]}/{obj[2:]}"
        new_tree = store.tree_with(tree, path, store.blob(new_text))
        new = store.commit(new_tree, [tip] if tip else [], "genjob: note\n")
        store.update_refs([RefUpdate(ref, tip, new)], message="genjob: note")

    retry_cas(ref, attempt)


def all_notes(store: Store, tree: pygit2.Tree) -> dict[str, pygit2.Oid]:
    """{annotated object hex: note blob} of a whole notes tree (for merges and remote checks)."""
    found = {}
    for path, oid in store.tree_files(tree).items():
        name = path.replace("/", "")
        if len(name) in (40, 64) and all(c in "0123456789abcdef" for c in name):
            found[name] = oid
    return found  # like git, entries that name no object are no notes (a merge leaves them out)


def notes_tree(store: Store, notes: dict[str, pygit2.Oid]) -> pygit2.Oid:
    """A notes tree with git's 2/38 fan-out."""
    return store.build_tree({f"{obj[:2]}/{obj[2:]}": oid for obj, oid in notes.items()})


def merge_notes(store: Store, local: pygit2.Oid, remote: pygit2.Oid) -> pygit2.Oid:
    """A two-parent notes commit holding both sides; a note on both sides is cat_sort_uniq'ed."""
    mine = all_notes(store, store.get_commit(local).tree)
    theirs = all_notes(store, store.get_commit(remote).tree)
    for obj, oid in theirs.items():
        if obj not in mine:
            mine[obj] = oid
        elif mine[obj] != oid:
            mine[obj] = store.blob(cat_sort_uniq(store.read(mine[obj]), store.read(oid)))
    return store.commit(notes_tree(store, mine), [local, remote], "genjob: merge notes\n")
