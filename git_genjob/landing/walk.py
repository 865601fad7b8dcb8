"""Which commits `log` and `audit` read (SPEC §12.2): a `Walk` of revisions, paths and git
log's limiting options, walked by git's own `rev-list`, and the range's base that trust is read
from."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

import pygit2

from git_genjob.documents.errors import BadInput, Unavailable
from git_genjob.storage.gitdir import clean_env
from git_genjob.storage.store import Store

SHALLOW_HINT = (
    "fetch the history and the base: actions/checkout with fetch-depth: 0, or "
    "git fetch --unshallow origin && git fetch origin main:refs/remotes/origin/main (docs/ci.md)"
)


@dataclass(frozen=True)
class Walk:
    """Which commits `log` and `audit` read: revisions, paths and git log's limiting options,
    which mean what they mean to `git log` because git's own revision walk applies them
    (`git rev-list`, SPEC §12.2); nothing else of git's reaches it."""

    revs: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    max_count: int | None = None
    since: str | None = None
    until: str | None = None
    authors: tuple[str, ...] = ()
    greps: tuple[str, ...] = ()
    reverse: bool = False
    first_parent: bool = False

    @property
    def label(self) -> str:
        """The walk as a `git log` command line would say it (for report titles)."""
        words = list(self.revs) or ["HEAD"]
        if self.max_count is not None:
            words.append(f"-n {self.max_count}")
        words += self._filters()
        words += ["--reverse"] if self.reverse else []
        words += ["--first-parent"] if self.first_parent else []
        return " ".join(words + (["--", *self.paths] if self.paths else []))

    def _filters(self) -> list[str]:
        """--since, --until, --author and --grep, as git log and git rev-list both read them."""
        words = [f"--since={self.since}"] if self.since else []
        words += [f"--until={self.until}"] if self.until else []
        return words + [f"--author={a}" for a in self.authors] + [f"--grep={g}" for g in self.greps]

    def rev_list(self) -> list[str]:
        args = ["--no-replace-objects", "rev-list"]
        if self.max_count is not None:
            args.append(f"--max-count={self.max_count}")
        args += self._filters()
        args += ["--first-parent"] if self.first_parent else []
        return [*args, "--end-of-options", *(self.revs or ("HEAD",)), "--", *self.paths]


def commits_in(store: Store, spec: str | None | Walk) -> list[pygit2.Commit]:
    """Commits of RANGE (`A..B`, revisions, `^A`; default HEAD's history) in git log's order,
    newest first (oldest first with `--reverse`), limited as git log limits them."""
    walk = spec if isinstance(spec, Walk) else Walk(revs=(spec,) if spec else ())
    _check_sides(store, walk)
    proc = subprocess.run(
        ["git", f"--git-dir={store.gitdir}", *walk.rev_list()],
        capture_output=True,
        text=True,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise BadInput(f"git rev-list refused {walk.label!r}: {proc.stderr.strip()}", "see git help log")
    commits = [store.get_commit(pygit2.Oid(hex=line)) for line in proc.stdout.split()]
    return commits[::-1] if walk.reverse else commits


def _check_sides(store: Store, walk: Walk) -> None:
    """Each side of each revision (`A`, `A..B`, `A...B`, `^A`) names a commit, or the real reason
    it does not, before git's rev-list says only that it failed."""
    for rev in walk.revs or ("HEAD",):
        for side in re.split(r"\.\.\.?", rev.removeprefix("^")) if rev != "..." else [rev]:
            range_commit(store, side or "HEAD", rev)


def range_commit(store: Store, rev: str, spec: str) -> pygit2.Commit:
    """The commit one side of RANGE names, or the real reason there is none."""
    try:
        return store.revparse_commit(rev)
    except (KeyError, ValueError, pygit2.GitError):
        pass
    where = f"{rev!r}" if rev == spec else f"{rev!r} (of {spec!r})"
    if not rev or rev.startswith("-"):
        raise BadInput(f"{spec!r} is not a revision range", "give A..B or a branch")
    if store.is_shallow:
        raise Unavailable(f"{where} is not in this shallow clone: it or its history was not fetched", SHALLOW_HINT)
    raise BadInput(
        f"{where} names no commit in this repository",
        "give A..B or a branch; a remote branch must be fetched first (git fetch origin main)",
    )


BASE_HINT = (
    " (trust is read from {base}, the range's base, and keys are judged as of now: a branch cannot vouch for "
    "a key it adds itself; land the trust change first, or check against another store with --trust-from REV)"
)


def range_base(spec: str | None | Walk) -> str | None:
    """The base of an audited range (`A..B`, `^A`): where trust is read from, or None."""
    revs = spec.revs if isinstance(spec, Walk) else (spec,) if spec else ()
    for rev in revs:
        if rev.startswith("^") and len(rev) > 1:
            return rev[1:]
        if ".." in rev and "..." not in rev:
            return rev.split("..", 1)[0] or "HEAD"
    return None
