"""refs/genjob/archive: every finished job's final tree at `<shard>/<key>`, and beside the shards
one rows blob per shard (`_rows/<shard>`, a status row per archived job), read and written over
a Store. The store stays generic git; what the archive's tree and rows look like is here.

A move into the archive is two steps (archive first, then the live ref, see `Archive.move`);
`finish_move` does the second for a live ref the archive already holds, taking the archive's
word only as far as the caller's `vouch` says (the ledger passes `records.vouch_problem`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pygit2

from git_genjob.documents.attempts import parse_meta
from git_genjob.documents.errors import BadInput, Conflict
from git_genjob.storage.faults import crash_point
from git_genjob.storage.layout import ARCHIVE_REF, ROWS_DIR, is_shard, job_ref, shard
from git_genjob.storage.store import FILE_MODE, TREE_MODE, RefUpdate, Store, lookup

ROWS_MAX_BYTES = 64 * 1024 * 1024  # a shard's rows at 1,000,000 archived jobs are about 1 MiB
ROWS_TREE = "#tree "  # the rows blob's first line: the shard tree id its lines were written for

# Why this clone cannot take an archive entry's word that job `key` ended (None: it can).
Vouch = Callable[[Store, str, pygit2.Tree], str | None]


# -- the rows codec: `#tree <shard tree id>`, then `sort key<TAB>key<TAB>entry tree<TAB>rest` --
def parse_rows(data: bytes | None) -> tuple[str | None, dict[str, tuple[str, str]]]:
    """(shard tree id the blob was written for, {key: (entry oid, line)}) of a shard's rows
    blob; a malformed line is skipped (the rows are a hint only)."""
    text = (data or b"").decode("utf-8", "replace")
    tree = None
    if text.startswith(ROWS_TREE):
        head, _, text = text.partition("\n")
        tree = head[len(ROWS_TREE) :]
    out: dict[str, tuple[str, str]] = {}
    for line in text.split("\n"):  # not splitlines: a row's JSON may hold U+2028
        parts = line.split("\t", 3)
        if len(parts) == 4:
            out[parts[1]] = (parts[2], line)
    return tree, out


def rows_header(tree: pygit2.Oid | str) -> bytes:
    """The first line of a rows blob written for shard tree `tree`."""
    return f"{ROWS_TREE}{tree}\n".encode()


def rows_blob(lines: dict[str, tuple[str, str]], tree: pygit2.Oid | None) -> bytes:
    body = "".join(line + "\n" for _, line in sorted(lines.values(), key=lambda v: v[1]))
    return (rows_header(tree) if tree is not None else b"") + body.encode("utf-8")


def union_rows(path: str, ours: pygit2.Blob, theirs: pygit2.Blob) -> bytes | None:
    """The merge of one name's two blobs in a union of archive trees (`Store.union_tree`): for
    a shard's status rows, both sides' lines (ours for a key both have; a line that names another
    tree than the merged entry is ignored by readers), vouching for no tree; None elsewhere (ours
    is kept: content-named files never differ)."""
    if path.rpartition("/")[0] != ROWS_DIR:
        return None
    return rows_blob({**parse_rows(theirs.data)[1], **parse_rows(ours.data)[1]}, None)


def _hint_bytes(blob: pygit2.Blob) -> bytes:
    """A rows blob's bytes without libgit2's SHA-1 re-check (half the read time at 100k
    rows): rows decide nothing, and each is checked against the tree ids it names."""
    pygit2.settings.enable_strict_hash_verification(False)
    try:
        data = blob.data
    finally:
        pygit2.settings.enable_strict_hash_verification(True)
    return data if isinstance(data, bytes) else bytes(data)


class Archive:
    """The archive of one repository, read and written through its Store."""

    def __init__(self, store: Store):
        self.store = store

    def entries(self) -> Iterator[tuple[str, pygit2.Oid]]:
        """(key, object id) of every entry under the archive's shards, in tree order."""
        for _, shard_tree, _, _ in self.shards():
            yield from ((str(e.name), e.id) for e in shard_tree)

    def shards(self) -> Iterator[tuple[str, pygit2.Tree, bytes | None, str | None]]:
        """(shard, its tree, that shard's rows blob's bytes and id, or None) for every archive shard."""
        store = self.store
        tip = store.ref_target(ARCHIVE_REF)
        if tip is None:
            return
        root = store.get_commit(tip).tree
        rows = lookup(root, ROWS_DIR)
        if isinstance(rows, pygit2.Tree):
            store.prefetch_trees([rows])
        for shard_entry in root:
            name = str(shard_entry.name)
            if not is_shard(name):
                continue
            shard_tree = store.local(shard_entry.id)
            if not isinstance(shard_tree, pygit2.Tree):
                continue
            data, blob_id = self._rows_hint(rows, name)
            yield name, shard_tree, data, blob_id

    def _rows_hint(self, rows: pygit2.Object | None, name: str) -> tuple[bytes | None, str | None]:
        """Shard `name`'s rows blob in the `_rows` tree `rows`: its bytes and id, or (None, None)."""
        blob = rows[name] if isinstance(rows, pygit2.Tree) and name in rows else None
        # A hint, so an oversized one (a hostile push) is ignored, not read into memory.
        size = self.store.local_size(blob.id) if blob is not None else None
        small = size is not None and size <= ROWS_MAX_BYTES
        data = _hint_bytes(blob) if isinstance(blob, pygit2.Blob) and small else None
        return data, str(blob.id) if data is not None and blob is not None else None

    def entry(self, key: str) -> pygit2.Tree | None:
        """The archived final tree of job `key` (one tree lookup), or None."""
        tip = self.store.ref_target(ARCHIVE_REF)
        if tip is None:
            return None
        tree = self.store.get_commit(tip).tree
        try:
            entry = tree[f"{shard(key)}/{key}"]
        except KeyError:
            return None
        obj = self.store.local(entry.id)
        return obj if isinstance(obj, pygit2.Tree) else None

    def tree_with(self, base: pygit2.Tree | None, key: str, job_tree: pygit2.Oid, row: str | None = None) -> pygit2.Oid:
        """`base` with `<shard>/<key>` set to `job_tree`, touching only that path, and with
        `row` (one line: sort key, key, then the rest, tab-separated) as that job's line in
        `_rows/<shard>`, so `status --all` reads one blob per shard instead of every job."""
        tree = self.store.tree_with(base, f"{shard(key)}/{key}", job_tree, TREE_MODE)
        return tree if row is None else self._with_row(base, tree, key, job_tree, row)

    def _with_row(
        self, base: pygit2.Tree | None, tree: pygit2.Oid, key: str, job_tree: pygit2.Oid, row: str
    ) -> pygit2.Oid:
        """`tree` (`base` with job `key` set) with `row` as that job's line in its shard's rows blob."""
        store = self.store
        sort_key, rest = row.split("\t", 1)
        rows_path = f"{ROWS_DIR}/{shard(key)}"
        old = lookup(base, rows_path)
        if isinstance(old, pygit2.Blob):
            store.fetch_missing([old.id])  # a partial clone's rows blob
        old_tree, lines = parse_rows(old.data if isinstance(old, pygit2.Blob) else None)
        old_shard = lookup(base, shard(key))
        lines[key] = (str(job_tree), f"{sort_key}\t{key}\t{job_tree}\t{rest}")
        built = store.local(tree)
        assert isinstance(built, pygit2.Tree)
        # Vouch for the whole new shard only if the old rows covered the whole old shard.
        complete = old_shard is None or (old_tree is not None and old_tree == str(old_shard.id))
        new_shard = lookup(built, shard(key))
        data = rows_blob(lines, new_shard.id if complete and new_shard is not None else None)
        return store.tree_with(built, rows_path, store.blob(data), FILE_MODE)

    def commit(
        self, key: str, job_tip: pygit2.Oid, final_tree: pygit2.Oid, message: str, row: str | None = None
    ) -> pygit2.Oid:
        """The next archive commit holding `final_tree` at <shard>/<key> (no ref move)."""
        store = self.store
        archive_tip = store.ref_target(ARCHIVE_REF)
        if archive_tip is None:
            base_parent = store.commit(store.build_tree({}), [], "genjob archive\n")
            base_tree = None
        else:
            base_parent = archive_tip
            base_tree = store.get_commit(archive_tip).tree
        tree = self.tree_with(base_tree, key, final_tree, row)
        return store.commit(tree, [base_parent, job_tip], message)

    def move(
        self, key: str, job_tip: pygit2.Oid, final_tree: pygit2.Oid, message: str, row: str | None = None
    ) -> pygit2.Oid:
        """Move a job out of the live refs into the archive: archive first, then the live ref.

        The files ref backend commits a multi-ref transaction one ref at a time, so a kill between
        the two could lose the job if the deletion went first. In this order every prefix is
        safe: after the first step the job is in both places, readers prefer the archive, and
        `finish_move` (run by apply, recover and status) deletes the leftover live ref.
        """
        archive_tip = self.store.ref_target(ARCHIVE_REF)
        new_tip = self.commit(key, job_tip, final_tree, message, row)
        self.store.update_refs([RefUpdate(ARCHIVE_REF, archive_tip, new_tip)], message=f"genjob: archive {key}")
        crash_point("archive-written")
        self.finish_move(key, vouch=None)
        return new_tip

    def finish_move(self, key: str, *, vouch: Vouch | None) -> bool:
        """Delete a live ref whose chain the archive already holds (the second step of a move).

        `vouch` None: the move is ours (this process just wrote the archive). Else the archive
        may have come from a remote: its word counts only where `vouch` finds no problem with
        the entry (`records.vouch_problem`: where this clone can vouch for it), else the live
        job stays."""
        store = self.store
        tip = store.ref_target(job_ref(key))
        entry = self.entry(key) if tip is not None else None
        if tip is None or entry is None:
            return False
        if not self.chain_holds(entry, tip):
            return False
        if vouch is not None and vouch(store, key, entry) is not None:
            return False
        try:
            store.update_refs([RefUpdate(job_ref(key), tip, None)], message=f"genjob: archived {key}")
        except Conflict:
            return False
        return True

    def chain_holds(self, entry: pygit2.Tree, tip: pygit2.Oid) -> bool:
        """Whether the archived job tree names `tip` in its chain (then the live ref is a leftover)."""
        meta = self.store.file_at(entry, "meta.json")
        try:
            return meta is not None and any(c.commit == str(tip) for c in parse_meta(meta).chain)
        except BadInput:
            return False
