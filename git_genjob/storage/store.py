"""Generic git over libgit2 (the only pygit2 writer): objects, trees, refs and their compare-and-swap
updates. What genjob keeps where is in `layout`; the archive's tree and rows are in `archive`; what
a partial or sparse clone lacks, git fills in through `partial`."""

from __future__ import annotations

import contextlib
import functools
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import pygit2

from git_genjob.documents.errors import (
    BadInput,
    Conflict,
    LockHeld,
    NotARepository,
    RefMoved,
    RemoteUnavailable,
)
from git_genjob.documents.paths import check_entry_name
from git_genjob.storage import durable, locks, partial
from git_genjob.storage.faults import crash_point
from git_genjob.storage.gitdir import (
    git_identity,
    git_role_date,
    live_keys,
    refuse_unsupported,
    resolve_common,
    sha256_refusal,
)
from git_genjob.storage.layout import LEDGER_REFS, kept_path

FILE_MODE = pygit2.enums.FileMode.BLOB
TREE_MODE = pygit2.enums.FileMode.TREE


@dataclass(frozen=True)
class MergeSides:
    """One path a 3-way merge could not resolve: (blob id, mode) on each side, None where absent."""

    path: str
    base: tuple[pygit2.Oid, int] | None
    ours: tuple[pygit2.Oid, int] | None
    theirs: tuple[pygit2.Oid, int] | None


DOCUMENT_MAX = 16 * 1024 * 1024  # a job's JSON documents, a commit, a note: far above any real one
CONTENT_MAX = 256 * 1024 * 1024  # a file's bytes (SPEC §8's per-receipt limit)


def lookup(tree: pygit2.Tree | None, path: str) -> pygit2.Object | None:
    """The entry at `path` in `tree`, or None."""
    if tree is None:
        return None
    try:
        return tree[path]
    except KeyError:
        return None


def blocking_prefix(tree: pygit2.Tree | None, path: str) -> str | None:
    """A leading component of `path` that exists in `tree` as something other than a directory."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        entry = lookup(tree, "/".join(parts[:i]))
        if entry is None:
            return None
        if entry.type_str != "tree":
            return "/".join(parts[:i])
    return None


LOCK_WAIT_S = 3.0
CAS_TRIES = 50
T = TypeVar("T")


def retry_cas(ref: str, attempt: Callable[[], T], hint: str = "try again", tries: int = CAS_TRIES) -> T:
    """The one compare-and-swap retry loop: run `attempt` (read the ref, build, update by CAS)
    again while it loses to another writer (RefMoved). A lock that stays held (LockHeld, a
    stale one included) is not a lost race: it goes up at once, naming the lock."""
    for _ in range(tries):
        try:
            return attempt()
        except LockHeld:
            raise
        except RefMoved:
            continue
    raise Conflict(f"{ref} kept moving: other writers won {tries} times in a row", hint)


def open_repo(path: str | None = None) -> pygit2.Repository:
    """Discover the repository around `path` (default: cwd); refuse what libgit2 cannot open."""
    start = path or os.getcwd()
    found = pygit2.discover_repository(start)
    if found is None:
        if os.environ.get("GIT_DIR"):
            raise NotARepository(
                f"not a git repository: {start} (git genjob finds the repository from the current directory "
                f"and ignores GIT_DIR={os.environ['GIT_DIR']})",
                "run git genjob inside the repository's work tree, or unset GIT_DIR",
            )
        raise NotARepository(f"not a git repository: {start}", "run git genjob inside a repository (git init)")
    refuse_unsupported(found)
    try:
        repo = durable.open_repository(found)
    except pygit2.GitError as exc:
        if "object format" in str(exc):
            raise sha256_refusal(found, str(exc)) from None
        raise NotARepository(f"cannot open repository {found}: {exc}") from None
    return repo


@dataclass(frozen=True)
class RefUpdate:
    """Move `name` from `expected` (None: must not exist) to `new` (None: delete)."""

    name: str
    expected: pygit2.Oid | None
    new: pygit2.Oid | None


class _BuildFailed(Exception):
    """The new value of a ref could not be built (an object write failed), inside its lock."""

    def __init__(self, error: pygit2.GitError):
        super().__init__(str(error))
        self.error = error


def _build_once(build: Callable[[], pygit2.Oid]) -> Callable[[], pygit2.Oid]:
    """`build`, run once (later calls return its value); a failed object write raises _BuildFailed."""
    made: list[pygit2.Oid] = []

    def value() -> pygit2.Oid:
        if not made:
            try:
                made.append(build())
            except pygit2.GitError as exc:
                raise _BuildFailed(exc) from exc
        return made[0]

    return value


def _stage_moves(txn: pygit2.ReferenceTransaction, updates: list[RefUpdate], message: str) -> bool:
    """Set or remove each ref of `updates` in `txn`; whether any ref is set (names objects)."""
    for u in updates:
        if u.new is None:
            txn.remove(u.name)
        else:
            txn.set_target(u.name, u.new, message=message)
    return any(u.new is not None for u in updates)


class Store:
    """All reads and writes of genjob's objects and refs in one repository."""

    def __init__(self, repo: pygit2.Repository):
        self._repo = repo

    @classmethod
    def open(cls, path: str | None = None) -> Store:
        return cls(open_repo(path))

    @property
    def gitdir(self) -> str:
        return str(self._repo.path)

    @property
    def workdir(self) -> str | None:
        wd = self._repo.workdir
        return str(wd).rstrip("/") if wd else None

    # -- objects ---------------------------------------------------------
    def signature(self, role: str = "committer", required: bool = False) -> pygit2.Signature:
        """git's identity for `role` ("author" or "committer"), read as git reads it:
        GIT_<ROLE>_NAME / _EMAIL / _DATE, else user.name / user.email and now. Without one,
        `required` refuses (exit 2, apply's commit lands on a user's branch); otherwise the
        fallback is git-genjob <genjob@localhost> (event commits under refs/genjob)."""
        name, email = git_identity(role, self.config_get, required)
        when = git_role_date(role)
        return pygit2.Signature(name, email) if when is None else pygit2.Signature(name, email, *when)

    def blob(self, data: bytes) -> pygit2.Oid:
        return self._repo.create_blob(data)

    def blob_from_file(self, path: str) -> pygit2.Oid:
        """A blob of a file's bytes, streamed by libgit2 (never the whole file in memory)."""
        return self._repo.create_blob_fromdisk(path)

    def _header(self, oid: pygit2.Oid | str) -> tuple[int, int] | None:
        """(type, size) from the object's header, nothing inflated; None when it is missing."""
        try:
            kind, size = self._repo.odb.read_header(oid)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return int(kind), int(size)

    def _check_size(self, oid: pygit2.Oid | str, limit: int | None, what: str) -> None:
        """Refuse an object over `limit` bytes before it is inflated: a fetched ref may name a
        2 GiB blob that packs into a few MiB (zeros), and reading it whole would exhaust memory."""
        header = self._header(oid) if limit is not None else None
        if header is None or limit is None:
            return  # no limit, or missing: the lookup after this says so
        size = header[1]
        if size > limit:
            raise BadInput(
                f"{what} {oid} is {size} bytes, over the {limit}-byte limit for it",
                "the ref that names it was damaged or forged; drop the job or fetch again",
            )

    def read(self, oid: pygit2.Oid | str, limit: int | None = DOCUMENT_MAX) -> bytes:
        """A blob's bytes, refused (BadInput) over `limit` (a document's unless told)."""
        if self.promisor_remote is not None and oid not in self._repo:
            self._fetch_documents([oid])
        self._check_size(oid, limit, "object")
        obj = self._repo.get(oid)
        if not isinstance(obj, pygit2.Blob):
            raise BadInput(f"object {oid} is not a blob")
        data = obj.data  # already bytes: no second copy
        return data if isinstance(data, bytes) else bytes(data)

    def hooks_dir(self) -> str:
        """git's hooks directory: core.hooksPath (relative to the work tree), else the common dir's."""
        try:
            path = str(self._repo.config["core.hooksPath"])
        except KeyError:
            return os.path.join(self.common_dir, "hooks")
        return (
            os.path.expanduser(path)
            if os.path.isabs(os.path.expanduser(path))
            else os.path.join(self.workdir or self.gitdir, path)
        )

    # -- partial clones (git clone --filter): libgit2 reports a missing blob, git fetches it --
    @functools.cached_property
    def promisor_remote(self) -> str | None:
        """The remote this partial clone fetches the objects it lacks from, or None (a full clone)."""
        return partial.promisor_remote(self)

    def fetch_missing(self, oids: Iterable[pygit2.Oid | str]) -> None:
        """Fetch the objects of `oids` this partial clone lacks, in one batch (`partial`)."""
        partial.fetch_missing(self, self.promisor_remote, oids)

    def _fetch_documents(self, oids: list[pygit2.Oid | str]) -> None:
        """`oids`, and at the first miss of this Store also every live job's documents and the
        archive's rows (small, and what status, show and a worker read next), in one batch."""
        if self.__dict__.get("_documents_fetched"):
            self.fetch_missing(oids)
            return
        self.__dict__["_documents_fetched"] = True
        try:
            self.fetch_missing([*oids, *partial.document_blobs(self)])
        except RemoteUnavailable:
            self.fetch_missing(oids)  # one hostile or lost object fails a batch: fetch what was asked

    def prefetch_trees(self, trees: Iterable[pygit2.Tree]) -> None:
        """In a partial clone, fetch the missing blobs directly under `trees` in one batch (a
        job's documents, before they are read one by one)."""
        if self.promisor_remote is not None:
            self.fetch_missing(e.id for tree in trees for e in tree if e.type_str == "blob")

    def blob_size(self, oid: pygit2.Oid) -> int:
        """A blob's size from its object header, read without inflating the object."""
        if self.promisor_remote is not None:
            self.fetch_missing([oid])
        kind, size = self._repo.odb.read_header(oid)
        if kind != pygit2.enums.ObjectType.BLOB:
            raise BadInput(f"object {oid} is not a blob")
        return int(size)

    def build_tree(self, files: dict[str, pygit2.Oid]) -> pygit2.Oid:
        """A tree from {path: blob oid}."""
        nested: dict[str, object] = {}
        for path, oid in files.items():
            node = nested
            *dirs, leaf = path.split("/")
            for d in dirs:
                child = node.setdefault(d, {})
                if not isinstance(child, dict):
                    raise BadInput(f"path {path!r} needs {d!r} to be both a file and a directory")
                node = child
            if leaf in node:
                raise BadInput(f"path {path!r} is both a file and a directory")
            node[leaf] = oid
        return self._write_tree(nested)

    def _write_tree(self, node: dict[str, object]) -> pygit2.Oid:
        tb = self._repo.TreeBuilder()
        for name, value in node.items():
            if isinstance(value, dict):
                tb.insert(name, self._write_tree(value), TREE_MODE)
            else:
                assert isinstance(value, pygit2.Oid)
                tb.insert(name, value, FILE_MODE)
        return tb.write()

    def tree_with(
        self, base: pygit2.Tree | None, path: str, oid: pygit2.Oid | None, mode: int = FILE_MODE
    ) -> pygit2.Oid:
        """`base` with the entry at `path` set to `oid` (None: removed), rewriting only the trees on
        that path: the cost is its depth, not the size of `base` (sharded inserts, notes)."""
        head, _, rest = path.partition("/")
        tb = self._repo.TreeBuilder(base) if base is not None else self._repo.TreeBuilder()
        if not rest:
            if oid is not None:
                tb.insert(head, oid, mode)
            elif tb.get(head) is not None:
                tb.remove(head)
            return tb.write()
        sub = lookup(base, head)
        child = self.tree_with(sub if isinstance(sub, pygit2.Tree) else None, rest, oid, mode)
        if oid is None and len(self._repo[child]) == 0:  # type: ignore[arg-type]
            if tb.get(head) is not None:
                tb.remove(head)
        else:
            tb.insert(head, child, TREE_MODE)
        return tb.write()

    def tree_files(self, tree: pygit2.Tree, prefix: str = "") -> dict[str, pygit2.Oid]:
        """{path: blob oid} for every blob under `tree`."""
        out: dict[str, pygit2.Oid] = {}
        for entry in tree:
            path = prefix + check_entry_name(str(entry.name), f"tree {tree.id}")
            if entry.type_str == "tree":
                sub = self._repo.get(entry.id)
                assert isinstance(sub, pygit2.Tree)
                out.update(self.tree_files(sub, path + "/"))
            elif entry.type_str == "blob":
                out[path] = entry.id
        return out

    def commit(
        self, tree: pygit2.Oid, parents: list[pygit2.Oid], message: str, identity_required: bool = False
    ) -> pygit2.Oid:
        """A commit object (no ref moves), authored and committed as git would (`signature`)."""
        author = self.signature("author", identity_required)
        committer = self.signature("committer", identity_required)
        return self._repo.create_commit(None, author, committer, message, tree, parents)

    def outputs_tree(self, base: pygit2.Tree | None, outputs: dict[str, pygit2.Oid | None]) -> pygit2.Oid:
        """`base` with each output path set to its blob (None: removed), through an in-memory
        index so that every new directory is made; an executable file stays executable."""
        index = pygit2.Index()
        if base is not None:
            index.read_tree(base)
        for path, oid in outputs.items():
            if oid is None:
                if path in index:
                    index.remove(path)
                continue
            mode = pygit2.enums.FileMode.BLOB
            if path in index and index[path].mode == pygit2.enums.FileMode.BLOB_EXECUTABLE:
                mode = pygit2.enums.FileMode.BLOB_EXECUTABLE
            index.add(pygit2.IndexEntry(path, oid, mode))
        return index.write_tree(self._repo)

    def union_tree(
        self,
        a: pygit2.Tree,
        b: pygit2.Tree,
        path: str = "",
        merge_blobs: Callable[[str, pygit2.Blob, pygit2.Blob], bytes | None] | None = None,
    ) -> pygit2.Oid:
        """Every entry of either tree, recursively (the shared ledgers' merge): for one name with
        two blobs, what `merge_blobs(path, ours, theirs)` makes of them, else (None) ours."""
        tb = self._repo.TreeBuilder(a)
        for entry in b:
            name = str(entry.name)
            if name not in a:
                tb.insert(name, entry.id, entry.filemode)
                continue
            mine = a[name]
            if mine.id == entry.id:
                continue
            ta, tb_ = self.get(mine.id), self.get(entry.id)
            if isinstance(ta, pygit2.Tree) and isinstance(tb_, pygit2.Tree):
                tb.insert(name, self.union_tree(ta, tb_, f"{path}{name}/", merge_blobs), TREE_MODE)
            elif merge_blobs is not None and isinstance(ta, pygit2.Blob) and isinstance(tb_, pygit2.Blob):
                merged = merge_blobs(f"{path}{name}", ta, tb_)
                if merged is not None:
                    tb.insert(name, self.blob(merged), entry.filemode)
            # Otherwise (same name, different blobs) ours is kept.
        return tb.write()

    def merge_trees(
        self, base: pygit2.Oid, ours: pygit2.Oid, theirs: pygit2.Oid
    ) -> tuple[pygit2.Oid | None, list[MergeSides]]:
        """libgit2's 3-way merge of three trees, rename detection off (a job names its paths):
        (the merged tree, []) when clean, else (None, each conflicting path's three sides).

        Like `git merge-tree`, it may add the merged blobs and trees to the object database; it
        never moves a ref or touches the work tree."""
        index = self._repo.merge_trees(base, ours, theirs, flags=pygit2.enums.MergeFlag(0))
        if index.conflicts is None:
            return index.write_tree(self._repo), []
        sides = []
        for entries in index.conflicts:
            path = next(e.path for e in entries if e is not None)
            a, o, t = ((e.id, int(e.mode)) if e is not None else None for e in entries)
            sides.append(MergeSides(path, a, o, t))
        return None, sorted(sides, key=lambda s: s.path)

    def merge_text(self, sides: MergeSides) -> bytes:
        """One conflicting file with git's conflict markers (`<<<<<<<`, `=======`, `>>>>>>>`)."""

        def entry(side: tuple[pygit2.Oid, int] | None) -> pygit2.IndexEntry | None:
            return pygit2.IndexEntry(sides.path, side[0], pygit2.enums.FileMode(side[1])) if side is not None else None

        result = self._repo.merge_file_from_index(entry(sides.base), entry(sides.ours), entry(sides.theirs))
        text = result if isinstance(result, str) else result.contents
        return text.encode("utf-8", "surrogateescape")

    # -- reads other planes need (they never touch the repository itself) --
    def get(self, oid: pygit2.Oid | str) -> pygit2.Object | None:
        """Any object, or None when it is not in the object database (a partial clone fetches
        it from its promisor remote first)."""
        if self.promisor_remote is not None and oid not in self._repo:
            self.fetch_missing([oid])
        return self._repo.get(oid)

    def local(self, oid: pygit2.Oid | str) -> pygit2.Object | None:
        """An object of this clone's database, never fetched: None when it is missing here."""
        return self._repo.get(oid)

    def local_size(self, oid: pygit2.Oid | str) -> int | None:
        """An object's size from its header (nothing inflated, nothing fetched), or None when missing."""
        header = self._header(oid)
        return None if header is None else header[1]

    def object_type(self, oid: pygit2.Oid | str) -> str | None:
        """ "commit", "tree", "blob" or "tag" from the object's header (nothing inflated), or None."""
        header = self._header(oid)
        if header is None:
            return None
        t = pygit2.enums.ObjectType
        names: dict[int, str] = {t.COMMIT: "commit", t.TREE: "tree", t.BLOB: "blob", t.TAG: "tag"}
        return names.get(header[0], "unknown")

    def has(self, oid: pygit2.Oid | str) -> bool:
        return oid in self._repo

    @property
    def is_shallow(self) -> bool:
        return bool(self._repo.is_shallow)

    def missing_parents(self, commit: pygit2.Commit) -> list[str]:
        """The parents `commit` names that this clone lacks: a shallow clone's boundary (libgit2
        shows such a commit as a root, so its own header is read) or a commit fetched alone."""
        ids = [str(i) for i in commit.parent_ids]
        if not ids:
            raw = self._repo.odb.read(commit.id)[1]
            header = raw.split(b"\n\n", 1)[0]
            ids = [line[7:].decode("ascii", "replace") for line in header.split(b"\n") if line.startswith(b"parent ")]
        return [i for i in ids if not self.has(i)]

    def descendant_of(self, oid: pygit2.Oid, ancestor: pygit2.Oid) -> bool:
        return bool(self._repo.descendant_of(oid, ancestor))

    def merge_base(self, a: pygit2.Oid, b: pygit2.Oid) -> pygit2.Oid | None:
        base = self._repo.merge_base(a, b)
        return base if isinstance(base, pygit2.Oid) else None

    @property
    def is_bare(self) -> bool:
        return bool(self._repo.is_bare)

    def head_commit(self) -> pygit2.Commit | None:
        """HEAD's commit, or None on an unborn branch."""
        if self._repo.head_is_unborn:
            return None
        return self._repo.head.peel(pygit2.Commit)

    def head_branch(self) -> str | None:
        """The ref HEAD points at (`refs/heads/…`), or None when HEAD is detached."""
        head = self._repo.references.get("HEAD")
        return str(head.target) if head is not None and head.type == pygit2.enums.ReferenceType.SYMBOLIC else None

    def revparse_commit(self, rev: str) -> pygit2.Commit:
        """The commit `rev` names; KeyError, ValueError or pygit2.GitError when it names none."""
        return self._repo.revparse_single(rev).peel(pygit2.Commit)

    def walk(self, tip: pygit2.Oid, hide: Iterable[pygit2.Oid] = ()) -> Iterator[pygit2.Commit]:
        """Commits reachable from `tip` and not from any of `hide`, children before parents."""
        walker = self._repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL)
        for oid in hide:
            walker.hide(oid)
        return iter(walker)

    def index(self) -> pygit2.Index:
        """The work tree's index, read from disk now."""
        index: pygit2.Index = self._repo.index
        index.read()
        return index

    def skip_worktree(self, paths: Iterable[str]) -> set[str]:
        """The paths of `paths` a sparse checkout leaves out of the work tree (`partial`)."""
        return partial.skip_worktree(self, paths)

    def worktree_file(self, path: str) -> bytes | None:
        """A work tree file as git sees it, a sparse checkout's from the index (`partial`)."""
        return partial.worktree_file(self, path)

    def status_file(self, path: str) -> int:
        return int(self._repo.status_file(path))

    # -- git config ------------------------------------------------------
    def config_get(self, name: str) -> str | None:
        try:
            return str(self._repo.config[name])
        except KeyError:
            return None

    def config_values(self, name: str) -> list[str]:
        try:
            return [str(v) for v in self._repo.config.get_multivar(name)]
        except (KeyError, pygit2.GitError):
            return []

    def config_add(self, name: str, value: str) -> bool:
        """Append `value` to a multi-valued key unless it is there already; whether it was added."""
        if value in self.config_values(name):
            return False
        self._repo.config.set_multivar(name, "^$", value)  # "^$" matches nothing: appends
        return True

    def config_set(self, name: str, value: str) -> None:
        self._repo.config[name] = value

    def config_delete(self, name: str, regex: str) -> None:
        self._repo.config.delete_multivar(name, regex)

    def remote_names(self) -> list[str]:
        return [str(n) for n in self._repo.remotes.names()]

    def get_commit(self, oid: pygit2.Oid | str) -> pygit2.Commit:
        self._check_size(oid, DOCUMENT_MAX, "commit")
        obj = self._repo.get(oid)
        if not isinstance(obj, pygit2.Commit):
            raise BadInput(f"object {oid} is not a commit")
        return obj

    def file_at(self, tree: pygit2.Tree, path: str, limit: int | None = DOCUMENT_MAX) -> bytes | None:
        try:
            entry = tree[path]
        except KeyError:
            return None
        if entry.type_str != "blob":
            return None
        if self.promisor_remote is not None and entry.id not in self._repo:
            self.prefetch_trees([tree])  # its siblings are read next: one fetch, not one each
        return self.read(entry.id, limit)

    # -- refs ------------------------------------------------------------
    def ref_target(self, name: str) -> pygit2.Oid | None:
        ref = self._repo.references.get(name)
        if ref is None:
            return None
        target = ref.resolve().target
        return target if isinstance(target, pygit2.Oid) else None

    def update_refs(self, updates: Iterable[RefUpdate], message: str = "git-genjob") -> None:
        """Apply all updates atomically, each checked against its expected value under lock.

        A value that differs from the expected one is a conflict (exit 4). A lock held by another
        writer is transient (it may be a loser of the same race): wait briefly and try again.
        """
        updates = list(updates)
        locks.announce(self.common_dir, [u.name for u in updates])
        try:
            self._locked_update(updates, message)
        finally:
            locks.release(self.common_dir)

    def update_ref_built(
        self, name: str, expected: pygit2.Oid | None, build: Callable[[], pygit2.Oid], message: str, wait: bool = True
    ) -> pygit2.Oid:
        """Lock `name`, check that it still holds `expected`, and only then write the new value
        `build()` returns (its objects) and move the ref: a writer that loses the race writes
        nothing. With wait=False a lock that another running git-genjob process recorded is a
        conflict at once, so a worker picks another job instead of waiting on the one being
        claimed; any other lock (a git command's, or a dead writer's) is waited on as usual.
        """
        built: list[pygit2.Oid] = []

        def new_value() -> pygit2.Oid:
            built.append(build())
            return built[-1]

        locks.announce(self.common_dir, [name])
        try:
            self._locked_update([RefUpdate(name, expected, None)], message, new_value, wait)
        finally:
            locks.release(self.common_dir)
        return built[-1]

    def _locked_update(
        self,
        updates: list[RefUpdate],
        message: str,
        build: Callable[[], pygit2.Oid] | None = None,
        wait: bool = True,
    ) -> None:
        """The CAS. With `build`, the one update's new value is made once its ref is locked."""
        deadline = time.monotonic() + LOCK_WAIT_S
        value = None if build is None else _build_once(build)  # a retry after a failed commit reuses it
        names = [u.name for u in updates]
        while True:
            self.check_expected(updates)  # cheap pre-check: a stale writer loses without locking
            try:
                self._move_locked(updates, message, value)
                return
            except _BuildFailed as failed:
                raise failed.error from None
            except pygit2.GitError as exc:
                locks.refuse_stale(self.common_dir, names)
                if not wait:
                    locks.refuse_claimed(self.common_dir, names, exc)
                if time.monotonic() > deadline:
                    raise locks.lock_timeout(self.common_dir, self.gitdir, names, exc) from None
                time.sleep(0.01 + random.random() * 0.02)

    def _move_locked(self, updates: list[RefUpdate], message: str, build: Callable[[], pygit2.Oid] | None) -> None:
        """One try of the CAS: lock every ref, check it again, make the new value if asked, move them."""
        with self._repo.transaction() as txn:
            for u in updates:
                txn.lock_ref(u.name)
            crash_point("ref-locked")
            self.check_expected(updates)
            if build is not None:
                updates = [RefUpdate(updates[0].name, updates[0].expected, build())]
            if _stage_moves(txn, updates, message):  # objects on disk before the refs naming them
                durable.before_ref_commit(self._objects_dir())
        durable.after_ref_commit(self.common_dir)  # the refs (not the objects) on disk before it returns
        self._keep([u for u in updates if u.name in LEDGER_REFS and u.new is not None])

    def _keep(self, updates: list[RefUpdate]) -> None:
        """Remember the last value genjob itself gave each shared ledger ref (the archive, the
        replay cache, the notes) in `.git/genjob/kept/`: a forced `git fetch` or a rewound
        remote can move those refs backwards behind genjob's back, and `kept_tip` lets `fetch`
        merge back what was lost while the objects still exist. A hint, written without fsync:
        losing it loses only that recovery, never a ref."""
        for u in updates:
            path = kept_path(self.common_dir, u.name)
            tmp = f"{path}.{os.getpid()}.tmp"
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(tmp, "w", encoding="ascii") as fh:
                    fh.write(f"{u.new}\n")
                os.replace(tmp, path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def kept_tip(self, name: str) -> pygit2.Oid | None:
        """The last value genjob gave ledger ref `name` here, if its commit still exists."""
        path = kept_path(self.common_dir, name)
        try:
            with open(path, encoding="ascii") as fh:
                oid = pygit2.Oid(hex=fh.read().strip())
        except (OSError, ValueError):
            return None
        return oid if self.object_type(oid) == "commit" else None

    def _objects_dir(self) -> str:
        return os.path.join(self.common_dir, "objects")

    def check_expected(self, updates: list[RefUpdate]) -> None:
        for u in updates:
            current = self.ref_target(u.name)
            if current != u.expected:
                raise RefMoved(
                    f"{u.name} moved: expected {u.expected or 'no ref'}, found {current or 'no ref'}",
                    "another writer got there first; re-read the state and try again",
                )

    @functools.cached_property
    def common_dir(self) -> str:
        return resolve_common(self.gitdir)

    def live_keys(self) -> list[str]:
        return live_keys(self.common_dir)

    def iter_refs(self, prefix: str) -> Iterator[tuple[str, pygit2.Oid]]:
        for name in self._repo.listall_references():
            if name.startswith(prefix):
                target = self.ref_target(name)
                if target is not None:
                    yield name, target
