"""The commit `apply` lands on a user's branch, signed as the user's own `git commit` signs (SPEC §12.2).

With `commit.gpgsign` off (the default) the commit is libgit2's, as every other commit genjob
writes. With it on, as the real `git config` reads it (includes, `includeIf`, `git -c`), the same
tree, parents, message, author and committer go through `git commit-tree -S`, so git signs with
the user's `gpg.format` (openpgp, ssh, x509), `user.signingkey`, `gpg.program` and
`gpg.ssh.program`, exactly as `git commit` would. No ref moves here: the caller moves the branch
with its compare-and-swap, so a signing failure (no key, a wrong one, no gpg) refuses with
nothing moved.

The ledger's own commits (under refs/genjob/ and the notes refs) are never signed this way: they
are internal records whose content carries its own DSSE signatures, and a passphrase prompt per
claim, heartbeat or note would stall workers. Only what lands on a user's branch is signed.
"""

from __future__ import annotations

import subprocess

import pygit2

from git_genjob.documents.errors import BadInput
from git_genjob.storage.gitdir import clean_env
from git_genjob.storage.store import Store

SIGN_HINT = (
    "check the key git signs with (git config user.signingkey, gpg.format, and for ssh that the file "
    "exists), or {what} without signing: git -c commit.gpgsign=false {command}"
)


def _git(
    store: Store, args: list[str], env: dict[str, str] | None = None, data: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", f"--git-dir={store.gitdir}", *args],
        cwd=store.workdir or store.gitdir,
        input=data,
        capture_output=True,
        env={**clean_env(), **(env or {})},
        stdin=subprocess.DEVNULL if data is None else None,
    )


def signing_on(store: Store) -> bool:
    """`commit.gpgsign` as git reads it (config files, includes, `git -c`); a value git itself
    cannot read as a boolean refuses, as `git commit` would."""
    proc = _git(store, ["config", "--type=bool", "--default=false", "--get", "commit.gpgsign"])
    if proc.returncode != 0:
        raise BadInput(
            "git cannot read commit.gpgsign: " + proc.stderr.decode("utf-8", "replace").strip(),
            "set it to true or false: git config commit.gpgsign false",
        )
    return proc.stdout.strip() == b"true"


def _date(sig: pygit2.Signature) -> str:
    sign = "-" if sig.offset < 0 else "+"
    minutes = abs(sig.offset)
    return f"@{sig.time} {sign}{minutes // 60:02d}{minutes % 60:02d}"


def user_commit(
    store: Store, tree: pygit2.Oid, parents: list[pygit2.Oid], message: str, command: str = "genjob apply KEY"
) -> pygit2.Oid:
    """The commit object for a user's branch (no ref moves): signed by git when the user's
    config signs commits, else libgit2's (`Store.commit`, identity required). `command` is what
    the hint of a signing failure tells the user to run again without signing."""
    if not signing_on(store):
        return store.commit(tree, parents, message, identity_required=True)
    hint = SIGN_HINT.format(what="apply", command=command)
    oid = _signed_commit_tree(store, tree, parents, message, hint)
    made = store.get_commit(oid)  # what git wrote is what libgit2 would have: same tree and parents
    if made.tree_id != tree or list(made.parent_ids) != list(parents):
        raise BadInput(f"git commit-tree wrote {oid} with another tree or parents", hint)
    return oid


def _signed_commit_tree(
    store: Store, tree: pygit2.Oid, parents: list[pygit2.Oid], message: str, hint: str
) -> pygit2.Oid:
    """The commit `git commit-tree -S` writes as the user's identity; BadInput when git cannot sign."""
    author = store.signature("author", required=True)
    committer = store.signature("committer", required=True)
    env = {
        "GIT_AUTHOR_NAME": author.name,
        "GIT_AUTHOR_EMAIL": author.email,
        "GIT_AUTHOR_DATE": _date(author),
        "GIT_COMMITTER_NAME": committer.name,
        "GIT_COMMITTER_EMAIL": committer.email,
        "GIT_COMMITTER_DATE": _date(committer),
    }
    args = ["commit-tree", "-S", str(tree)]
    for parent in parents:
        args += ["-p", str(parent)]
    proc = _git(store, args, env, message.encode("utf-8"))
    if proc.returncode != 0:
        said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BadInput(
            "git could not sign the commit (commit.gpgsign is true); nothing was applied",
            hint,
            details=[f"git: {line}" for line in said if line.strip()] or ["git commit-tree -S failed"],
        )
    return pygit2.Oid(hex=proc.stdout.decode("ascii").strip())
