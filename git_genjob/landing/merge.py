"""A verified job on a branch that moved: git's 3-way merge, and its proof (SPEC §11).

The merge is libgit2's (the merge-ort rules `git merge` follows for content, deletions, modes,
file/directory and binary conflicts), never one written here, over three trees that differ only
at the job's allowed paths: the branch (ours), the branch with those paths at the job's inputs
(the base) and the base with the receipt's outputs (theirs). `apply` lands a clean result as one
commit on the branch tip carrying `Genjob-Merged-Onto: <tip>`; `audit` recomputes the same merge
from the job's inputs, the receipt's outputs and the commit's parent and compares trees, so one
byte off anywhere fails. A conflict names each path and its hunks and writes no ref.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pygit2

from git_genjob.documents.canonical import digest
from git_genjob.documents.errors import BadInput, Refused
from git_genjob.documents.receipt import Predicate
from git_genjob.storage.records import JobRecord, bundle_inputs
from git_genjob.storage.store import MergeSides, Store, blocking_prefix, lookup

MERGED_TRAILER = "Genjob-Merged-Onto"
CONTEXT_LINES = 2  # lines shown around each conflicting hunk, as `git diff` shows three
MAX_HUNK_LINES = 60  # per path: a refusal stays readable; the rest is one `git merge-file` away
_OID = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class PathConflict:
    """One path the merge could not resolve: why, and its hunks with conflict markers."""

    path: str
    why: str
    hunks: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [f"{self.path}: {self.why}", *(f"  {line}" for line in self.hunks)]


@dataclass(frozen=True)
class Merge:
    """The result: the merged tree and what it changes on the branch, or the conflicts."""

    tree: pygit2.Oid | None
    changes: dict[str, pygit2.Oid | None] = field(default_factory=dict)
    conflicts: tuple[PathConflict, ...] = ()

    @property
    def clean(self) -> bool:
        return self.tree is not None

    def conflict_lines(self) -> list[str]:
        return [line for c in self.conflicts for line in c.lines()]


def job_inputs(store: Store, record: JobRecord) -> dict[str, pygit2.Oid | None]:
    """{allowed path: input blob, or None for a path the job creates}, each blob re-hashed against
    job.json (the stored inputs/ lie outside the job's digest): a tampered one is BadInput."""
    data = bundle_inputs(store, record)
    return {p: (store.blob(data[p]) if d is not None else None) for p, d in record.job.input_map.items()}


def job_outputs(store: Store, record: JobRecord, pred: Predicate) -> dict[str, pygit2.Oid | None]:
    """{output path: stored blob, or None to delete}, each re-hashed against the signed digest."""
    stored = record.output_oids()
    out: dict[str, pygit2.Oid | None] = {}
    for path, want in pred.outputs.items():
        if want is None:
            out[path] = None
            continue
        if path not in stored:
            raise BadInput(f"job {record.key}: no output blob stored for {path}")
        have = digest(store.read(stored[path], limit=None))
        if have != want:
            raise BadInput(f"job {record.key}: the stored output {path} hashes to {have}, the receipt says {want}")
        out[path] = stored[path]
    return out


def three_way(
    store: Store, ours: pygit2.Tree | None, inputs: dict[str, pygit2.Oid | None], outputs: dict[str, pygit2.Oid | None]
) -> Merge:
    """Merge the receipt's outputs onto `ours`, with the job's inputs as the merge base."""
    shapes = _shape_conflicts(ours, inputs)
    if shapes:  # the base cannot be the branch with the job's files: git's file/directory conflict
        return Merge(None, conflicts=shapes)
    ours_id = ours.id if ours is not None else store.build_tree({})
    ours_tree = _tree(store, ours_id)
    base = store.outputs_tree(ours, inputs)
    theirs = store.outputs_tree(_tree(store, base), outputs)
    merged, sides = store.merge_trees(base, ours_id, theirs)
    if merged is None:
        return Merge(None, conflicts=tuple(_describe(store, s) for s in sides))
    changes = changed_paths(ours_tree, _tree(store, merged))
    outside = sorted(set(changes) - set(inputs))
    if outside:  # never expected (base and theirs differ from ours only at allowed paths); refuse if so
        return Merge(
            None, conflicts=(PathConflict(", ".join(outside), "the merge would change paths the job does not allow"),)
        )
    return Merge(merged, changes)


def _shape_conflicts(ours: pygit2.Tree | None, inputs: dict[str, pygit2.Oid | None]) -> tuple[PathConflict, ...]:
    out = []
    for path in sorted(inputs):
        blocker = blocking_prefix(ours, path)
        entry = lookup(ours, path)
        if blocker is not None:
            out.append(PathConflict(path, f"a file/directory conflict: {blocker} is a file on the branch"))
        elif entry is not None and entry.type_str != "blob":
            out.append(PathConflict(path, f"a file/directory conflict: it is a {entry.type_str} on the branch"))
        elif entry is not None and entry.filemode == pygit2.enums.FileMode.LINK:  # §8: never a symlink
            out.append(PathConflict(path, "it is a symbolic link on the branch, which no job may write"))
    return tuple(out)


def changed_paths(a: pygit2.Tree, b: pygit2.Tree) -> dict[str, pygit2.Oid | None]:
    """{path: blob in b, or None where b lacks it} for every file that differs from a to b."""
    out: dict[str, pygit2.Oid | None] = {}
    for delta in a.diff_to_tree(b).deltas:
        if delta.status == pygit2.enums.DeltaStatus.DELETED:
            out.setdefault(delta.old_file.path, None)
        else:
            out[delta.new_file.path] = delta.new_file.id
    return out


def _tree(store: Store, oid: pygit2.Oid) -> pygit2.Tree:
    tree = store.get(oid)
    assert isinstance(tree, pygit2.Tree)
    return tree


def _describe(store: Store, s: MergeSides) -> PathConflict:
    """Why a path does not merge: a side without a file there, binary content, or the text's
    conflicting hunks."""
    if s.ours is None or s.theirs is None:
        return PathConflict(s.path, _fileless_side(s))
    sides = [x for x in (s.base, s.ours, s.theirs) if x is not None]
    if any(b"\0" in store.read(oid, limit=None)[:8000] for oid, _ in sides):
        return PathConflict(s.path, "a binary file both the job and the branch changed")
    why = "the job and the branch changed the same lines" if s.base else "both the job and the branch created it"
    return PathConflict(s.path, why, tuple(hunks(store.merge_text(s))))


def _fileless_side(s: MergeSides) -> str:
    """Why a path where the branch (ours) or the job (theirs) has no file does not merge."""
    if s.ours is None and s.theirs is not None:
        return "the job changed it, the branch deleted it (or made it a directory)"
    if s.theirs is None and s.ours is not None:
        return (
            "the job deleted it, the branch changed it"
            if s.base
            else "the branch made a directory where the job writes"
        )
    return "a file/directory conflict"


def hunks(text: bytes) -> list[str]:
    """The conflicting hunks of a file with conflict markers, with a little context each."""
    lines = text.decode("utf-8", "replace").splitlines()
    out: list[str] = []
    n = 0
    while n < len(lines):
        if not lines[n].startswith("<<<<<<<"):
            n += 1
            continue
        end = n
        while end < len(lines) and not lines[end].startswith(">>>>>>>"):
            end += 1
        start = max(0, n - CONTEXT_LINES)
        out.append(f"@@ line {n + 1} @@")
        for line in lines[start : min(len(lines), end + 1 + CONTEXT_LINES)]:
            if line.startswith("<<<<<<<"):
                line = "<<<<<<< branch"
            elif line.startswith(">>>>>>>"):
                line = ">>>>>>> job"
            out.append(line)
        n = end + 1
    if len(out) > MAX_HUNK_LINES:
        out = [*out[:MAX_HUNK_LINES], f"... ({len(out) - MAX_HUNK_LINES} more lines)"]
    return out


def merge_onto(
    store: Store, record: JobRecord, outputs: dict[str, pygit2.Oid | None], tree: pygit2.Tree | None, branch: str
) -> Merge:
    """`apply`'s merge onto a moved branch (check 8 as §11 reads it): a conflict refuses (exit 1)
    before anything is written to a ref or the work tree, naming each path and its hunks."""
    key = record.key
    try:
        inputs = job_inputs(store, record)
    except BadInput as exc:
        raise Refused(f"job {key} is stale and cannot be merged: {exc.message}", "submit a new job") from None
    merge = three_way(store, tree, inputs, outputs)
    if not merge.clean:
        raise Refused(
            f"job {key} is stale: its outputs do not merge cleanly onto {branch}",
            f"land it beside the branch for a human merge: git genjob apply {key} --branch genjob/{key}; "
            f"or mint a new job on the current content: git genjob resubmit {key}",
            details=merge.conflict_lines(),
        )
    if not merge.changes:
        raise Refused(
            f"job {key}: {branch} already holds everything its outputs change; there is nothing to apply",
            f"end it: git genjob drop {key} --why 'already on {branch}'",
        )
    return merge


def check_merge(
    store: Store, record: JobRecord, pred: Predicate | None, tree: pygit2.Tree | None, stale: list[str]
) -> tuple[list[str], str]:
    """Check 8 for `verify` (§11): (problems, what passed). Stale means "does not merge cleanly"."""
    if not stale:
        return [], "inputs unchanged in the target"
    if pred is None or pred.status != "ok":
        return stale, ""
    try:
        merge = three_way(store, tree, job_inputs(store, record), job_outputs(store, record, pred))
    except BadInput as exc:
        return [*stale, f"cannot merge: {exc.message}"], ""
    if not merge.clean:
        return [f"stale: does not merge cleanly at {c.path} ({c.why})" for c in merge.conflicts], ""
    if not merge.changes:
        return ["the target already holds everything the outputs change: nothing to apply"], ""
    return [], "the target moved (" + "; ".join(stale) + "); the outputs merge cleanly: apply will merge"


def audit_merged(
    store: Store, commit: pygit2.Commit, record: JobRecord | None, pred: Predicate, onto: str
) -> tuple[list[str], list[str]]:
    """`audit` of a commit carrying `Genjob-Merged-Onto` (in place of "the commit's diff is exactly
    the outputs"): (problems, facts). The merge of the receipt's outputs onto the commit's parent,
    with the job's inputs as its base, recomputed here, must be clean and equal the commit's tree."""
    if not _OID.match(onto):
        return [f"{MERGED_TRAILER} is {onto[:80]!r}, not a commit id"], []
    if record is None:
        return [
            f"merged apply: job {pred.key} is not in this clone, so its inputs and outputs cannot be "
            "merged again (git genjob fetch brings the archive)"
        ], []
    if not commit.parents:
        return ["merged apply: the commit has no parent to merge onto"], []
    parent = commit.parents[0]
    facts = (
        [] if onto == str(parent.id) else [f"merged onto {onto[:12]}, now on {str(parent.id)[:12]}: recomputed there"]
    )
    try:
        merge = three_way(store, parent.tree, job_inputs(store, record), job_outputs(store, record, pred))
    except BadInput as exc:
        return [f"merged apply: {exc.message}"], facts
    if not merge.clean:
        return [
            "the recomputed merge onto the parent conflicts at: " + ", ".join(c.path for c in merge.conflicts)
        ], facts
    if merge.tree != commit.tree.id:
        differ = sorted(changed_paths(_tree(store, merge.tree or commit.tree.id), commit.tree))
        return ["commit tree != recomputed merge of the receipt's outputs: differs at " + ", ".join(differ)], facts
    return [], facts


def side_branch_base(store: Store, record: JobRecord, branch: str | None) -> pygit2.Oid | None:
    """`apply KEY --branch genjob/KEY` when that branch does not exist yet (SPEC §11, on a
    conflict): the commit the job was submitted on, where the job's commit lands as a plain
    apply for a human to merge with ordinary git. None for any other branch."""
    if branch is None or branch.removeprefix("refs/heads/") != f"genjob/{record.key}":
        return None
    if store.ref_target(f"refs/heads/genjob/{record.key}") is not None:
        return None
    base = record.meta.base
    if base is None or store.object_type(base) != "commit":
        raise Refused(
            f"job {record.key} names no base commit this repository has ({base or 'none'})",
            "fetch the commit it was submitted on, or create the branch yourself: git branch genjob/KEY REV",
        )
    return pygit2.Oid(hex=base)
