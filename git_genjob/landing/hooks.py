"""Hook installation (chaining the user's own hooks) and the hook implementations (SPEC §9)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from git_genjob.documents.errors import EXIT_CONFLICT, EXIT_OK, EXIT_REFUSED, EXIT_USAGE

if TYPE_CHECKING:
    import pygit2

    from git_genjob.storage.store import Store

MARKER = "# git-genjob hook:"
HOOKS = ("pre-commit", "commit-msg", "pre-push", "pre-apply")


def _template() -> str:
    from importlib.resources import files

    return (files("git_genjob") / "resources" / "hook.sh").read_text(encoding="utf-8")


def install_hooks(store: object, force: bool = False) -> list[str]:
    """Write genjob's hook scripts; an existing user hook is kept as `<name>.genjob-chained` and run first."""
    from git_genjob.documents.errors import BadInput
    from git_genjob.storage.store import Store

    assert isinstance(store, Store)
    hooks_dir = store.hooks_dir()
    os.makedirs(hooks_dir, exist_ok=True)
    done = []
    for name in HOOKS:
        path = os.path.join(hooks_dir, name)
        chained = path + ".genjob-chained"
        if os.path.lexists(path) and not _ours(path):
            if os.path.lexists(chained):
                if not force:
                    raise BadInput(f"{path} exists and {chained} is taken", "move one of them, or pass --force")
                os.replace(chained, chained + ".old")  # --force keeps the older hook too, unrun
                done.append(f"{name}: the previously chained hook was kept as {name}.genjob-chained.old")
            os.replace(path, chained)
            done.append(f"{name} (your hook kept as {name}.genjob-chained, run first)")
        else:
            done.append(name)
        text = _template().replace("@HOOK@", name).replace("@PYTHON@", sys.executable)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    return done


def _ours(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return MARKER in fh.read(400)
    except OSError:
        return False


def run_hook(name: str, args: list[str]) -> int:
    """Entry for `git genjob hook NAME ARGS` (no click: hooks run on every commit)."""
    from git_genjob.documents.errors import GenjobError, format_error

    handlers = {"pre-commit": _pre_commit, "commit-msg": _commit_msg, "pre-push": _pre_push, "pre-apply": _pre_apply}
    if name not in handlers:
        print(f"git genjob hook: unknown hook {name!r} (one of {', '.join(HOOKS)})", file=sys.stderr)
        return EXIT_USAGE
    try:
        return handlers[name](args)
    except GenjobError as err:
        print(f"git-genjob {name}: " + format_error(err), file=sys.stderr)
        return err.exit_code


def _store() -> Store:
    from git_genjob.storage.store import Store

    return Store.open()


def _pre_commit(args: list[str]) -> int:
    """One writer per path: refuse a hand commit touching a path a live job holds."""
    from git_genjob.storage.gitdir import common_dir, live_keys

    common = common_dir()
    if common is not None and not live_keys(common):
        return EXIT_OK  # no live job holds any path: nothing to check, and no libgit2 to load
    import pygit2

    from git_genjob.planner.queue import allowed_paths_of
    from git_genjob.storage.store import lookup

    store = _store()
    # `git commit -a`, `git commit PATH` and `--only` commit a temporary index that git names
    # in GIT_INDEX_FILE: that one, not .git/index, is what this commit will hold.
    index_file = os.environ.get("GIT_INDEX_FILE")
    if index_file:
        index = pygit2.Index(os.path.abspath(index_file))
        index.read()
    else:
        index = store.index()
    head = store.head_commit()
    tree = head.tree if head is not None else None

    def staged(path: str) -> bool:
        entry = index[path] if path in index else None  # noqa: SIM401 (pygit2.Index has no get)
        in_head = lookup(tree, path)
        return (entry.id if entry is not None else None) != (in_head.id if in_head is not None else None)

    held = []
    for key in store.live_keys():
        for path in sorted(p for p in allowed_paths_of(store, key) if staged(p)):
            held.append(f"{path} is held by live job {key}")
    if held:
        print("git-genjob pre-commit: refusing a hand commit of paths a live job holds:", file=sys.stderr)
        for line in held:
            print(f"  - {line}", file=sys.stderr)
        print(
            "hint: apply the job (git genjob apply KEY) or drop it (git genjob drop KEY --why ...), "
            "or commit with --no-verify",
            file=sys.stderr,
        )
        return EXIT_CONFLICT
    return EXIT_OK


def _commit_msg(args: list[str]) -> int:
    """Refuse Genjob-* trailers that no verified receipt backs."""
    from git_genjob.storage.gitdir import parse_trailers

    with open(args[0], encoding="utf-8", errors="replace") as fh:
        message = "\n".join(line for line in fh.read().splitlines() if not line.startswith("#"))
    trailers = {k: v for k, v in parse_trailers(message).items() if k.startswith("Genjob-")}
    if not trailers:
        return EXIT_OK
    from git_genjob.documents.errors import GenjobError
    from git_genjob.landing.verify import check_receipt, trust_from_worktree
    from git_genjob.storage.records import find_job

    store = _store()
    problems = []
    key = trailers.get("Genjob-Key")
    if not key:
        problems.append("Genjob-* trailers without Genjob-Key")
    else:
        try:
            record = find_job(store, key)
            verdict = check_receipt(store, record, trust_from_worktree(store))
            problems += verdict.failures()
            if trailers.get("Genjob-Job") != record.job.digest:
                problems.append(f"Genjob-Job is {trailers.get('Genjob-Job')}, job {key} is {record.job.digest}")
            if verdict.envelope and trailers.get("Genjob-Receipt") != verdict.envelope.digest:
                problems.append(
                    f"Genjob-Receipt is {trailers.get('Genjob-Receipt')}, receipt is {verdict.envelope.digest}"
                )
        except GenjobError as exc:  # any failure to find or read the job means: not backed
            problems.append(exc.message)
    if problems:
        print("git-genjob commit-msg: Genjob-* trailers that no verified receipt backs:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        print("hint: genjob commits are made by git genjob apply; remove the trailers", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK


def _pre_push(args: list[str]) -> int:
    """Refuse pushing genjob commits that fail audit or whose note the remote will not have."""
    from git_genjob.storage.store import NOTES_REF

    store = _store()
    remote = args[0] if args else "origin"
    lines = [parts for parts in (line.split() for line in sys.stdin.read().splitlines()) if len(parts) == 4]
    pushing_notes = any(p[2] == NOTES_REF and p[0] != "(delete)" for p in lines)
    notes_on_remote = _RemoteNotes(store, remote)
    problems = []
    for _local_ref, local_sha, remote_ref, remote_sha in lines:
        if remote_ref.startswith(("refs/genjob/", "refs/notes/")) or set(local_sha) == {"0"}:
            continue
        problems += _check_pushed(store, remote, local_sha, remote_sha, pushing_notes, notes_on_remote)
    if problems:
        print("git-genjob pre-push: refusing to push genjob commits that fail audit:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK


class _RemoteNotes:
    """Which commits the remote's refs/notes/genjob annotates (asked once, only if needed)."""

    def __init__(self, store: Store, remote: str):
        self.store, self.remote = store, remote
        self._notes: set[str] | None = None

    def has(self, commit_id: str) -> bool:
        if self._notes is None:
            self._notes = self._load()
        return commit_id in self._notes

    def _load(self) -> set[str]:
        import subprocess

        from git_genjob.storage.notes import all_notes
        from git_genjob.storage.remote import clean_env
        from git_genjob.storage.store import NOTES_REF

        proc = subprocess.run(
            ["git", "ls-remote", self.remote, NOTES_REF], capture_output=True, text=True, env=clean_env()
        )
        oid = proc.stdout.split()[0] if proc.returncode == 0 and proc.stdout.strip() else None
        if oid is None or not self.store.has(oid):
            return set()
        return set(all_notes(self.store, self.store.get_commit(oid).tree))


def _check_pushed(
    store: Store, remote: str, local_sha: str, remote_sha: str, pushing_notes: bool, notes: _RemoteNotes
) -> list[str]:
    from git_genjob.landing.audit import audit_one
    from git_genjob.landing.verify import TrustStore, trust_from_tree
    from git_genjob.storage.notes import read_note

    problems: list[str] = []
    tip_trust: TrustStore | None = None
    for commit in _new_commits(store, remote, local_sha, remote_sha):
        tip_trust = tip_trust or trust_from_tree(store, store.get_commit(local_sha).tree)
        checked = audit_one(store, commit, tip_trust)
        if checked is None:
            continue
        short = str(commit.id)[:12]
        problems += [f"{short}: {p}" for p in checked.problems]
        if checked.ok and checked.merged:  # SPEC §11: say which pushed commits audit proved as merges
            print(f"git-genjob pre-push: {short} {checked.provenance}", file=sys.stderr)
        if read_note(store, commit.id) is not None and not pushing_notes and not notes.has(str(commit.id)):
            problems.append(f"{short}: its note is not on {remote} (run git genjob push first)")
    return problems


def _new_commits(store: Store, remote: str, local_sha: str, remote_sha: str) -> Iterator[pygit2.Commit]:
    """Commits the push sends: reachable from local_sha, not from what the remote already has."""
    import pygit2

    hide = [oid for _name, oid in store.iter_refs(f"refs/remotes/{remote}/")]
    if set(remote_sha) != {"0"} and store.has(remote_sha):
        hide.append(pygit2.Oid(hex=remote_sha))
    yield from store.walk(pygit2.Oid(hex=local_sha), hide)


def _pre_apply(args: list[str]) -> int:
    """Run `[hooks] pre_apply` from .genjob/config.toml (GENJOB_OUTPUTS is set by apply)."""
    import subprocess

    from git_genjob.documents.config import read_config

    store = _store()
    command = read_config(store).pre_apply
    if not command:
        return EXIT_OK
    return subprocess.run(["sh", "-c", command], cwd=store.workdir or store.gitdir).returncode
