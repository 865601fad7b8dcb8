"""Hook installation (chaining the user's own hooks) and the hook implementations (SPEC §9)."""

from __future__ import annotations

import hashlib
import os
import sys
import time

from git_genjob.documents.errors import EXIT_CONFLICT, EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from git_genjob.storage.layout import GENJOB_PREFIX, JOBS_PREFIX, NOTES_PREFIX, NOTES_REF, NOTES_REFS, hook_paths_path

TYPE_CHECKING = False  # typing itself costs a hook ~5 ms to import; mypy reads this name as typing's
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    import pygit2

    from git_genjob.storage.store import Store

MARKER = "# git-genjob hook:"
HOOKS = ("pre-commit", "commit-msg", "pre-push", "pre-apply")


def _template() -> str:
    from importlib.resources import files

    return (files("git_genjob") / "resources" / "hook.sh").read_text(encoding="utf-8")


def install_hooks(store: object, force: bool = False) -> list[str]:
    """Write genjob's hook scripts; an existing user hook is kept as `<name>.genjob-chained` and run first.

    A hooks directory inside the work tree (a tracked `core.hooksPath`) is shared: its scripts
    name no path of this machine, and this clone's interpreter goes into its own config
    (`genjob.hookPython`, `genjob.hookPythonPath`) instead. A script that already says what
    would be written is left untouched."""
    from git_genjob.documents.errors import BadInput
    from git_genjob.storage.store import Store

    assert isinstance(store, Store)
    hooks_dir = store.hooks_dir()
    os.makedirs(hooks_dir, exist_ok=True)
    python, pythonpath = sys.executable, package_parent()
    shared = _in_work_tree(store, hooks_dir)
    if shared:
        store.config_set("genjob.hookPython", python)
        store.config_set("genjob.hookPythonPath", pythonpath)
        python = pythonpath = ""
    done = []
    for name in HOOKS:
        path = os.path.join(hooks_dir, name)
        chained = path + ".genjob-chained"
        if os.path.lexists(path) and not installed_by_genjob(path):
            if os.path.lexists(chained):
                if not force:
                    raise BadInput(f"{path} exists and {chained} is taken", "move one of them, or pass --force")
                os.replace(chained, chained + ".old")  # --force keeps the older hook too, unrun
                done.append(f"{name}: the previously chained hook was kept as {name}.genjob-chained.old")
            os.replace(path, chained)
            done.append(f"{name} (your hook kept as {name}.genjob-chained, run first)")
        else:
            done.append(name)
        text = render_hook(name, python, pythonpath)
        if _read(path) == text and os.access(path, os.X_OK):
            continue  # a shared file stays byte for byte (and mtime) as it is
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    return done


def hook_states(store: object) -> dict[str, str]:
    """Each hook's state here, for `doctor`: `missing`, `foreign` (a script that is not genjob's),
    `current` (what `init --hooks` would write now, for this package and interpreter) or `stale`
    (genjob's, written for another install)."""
    from git_genjob.storage.store import Store

    assert isinstance(store, Store)
    hooks_dir = store.hooks_dir()
    shared = _in_work_tree(store, hooks_dir)
    python, pythonpath = ("", "") if shared else (sys.executable, package_parent())
    states = {}
    for name in HOOKS:
        path = os.path.join(hooks_dir, name)
        if not os.path.lexists(path):
            states[name] = "missing"
        elif not installed_by_genjob(path):
            states[name] = "foreign"
        else:
            current = _read(path) == render_hook(name, python, pythonpath) and os.access(path, os.X_OK)
            if shared and current:
                current = store.config_get("genjob.hookPythonPath") == package_parent()
            states[name] = "current" if current else "stale"
    return states


def render_hook(name: str, python: str, pythonpath: str) -> str:
    """The hook script for `name`; empty `python` means: read it from the clone's config."""
    for value in (python, pythonpath):
        if "'" in value or "\n" in value:
            from git_genjob.documents.errors import BadInput

            raise BadInput(f"cannot write a hook naming {value!r}", "install git-genjob under a plainer path")
    return _template().replace("@HOOK@", name).replace("@PYTHONPATH@", pythonpath).replace("@PYTHON@", python)


def package_parent() -> str:
    """The directory that holds the git_genjob package (site-packages, or an editable checkout)."""
    import git_genjob

    return os.path.dirname(os.path.dirname(os.path.abspath(git_genjob.__file__)))


def _in_work_tree(store: Store, path: str) -> bool:
    if store.workdir is None:
        return False
    real, top = os.path.realpath(path), os.path.realpath(store.workdir)
    inside_git = os.path.realpath(store.gitdir).rstrip(os.sep) + os.sep
    return (real + os.sep).startswith(top.rstrip(os.sep) + os.sep) and not (real + os.sep).startswith(inside_git)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def installed_by_genjob(path: str) -> bool:
    """A hook script genjob wrote (its marker in the first lines): the others are the user's own."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return MARKER in fh.read(400)
    except OSError:
        return False


def run_hook(name: str, args: list[str]) -> int:
    """Entry for `git genjob hook NAME ARGS` (no click: hooks run on every commit).

    Each hook first decides from what git lists cheaply (the live job refs, the message, the
    pushed range) whether there is anything to check, and loads libgit2 only when there is.
    The installed scripts start Python without site-packages (`python -S`, SPEC §9 speed);
    `ensure_site()` adds them before anything outside the standard library is imported.
    """
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


def ensure_site() -> None:
    """Add site-packages (and run their .pth files) if Python was started with -S."""
    if sys.flags.no_site:
        import site

        site.main()


def _store() -> Store:
    ensure_site()
    from git_genjob.storage.store import Store

    return Store.open()


def _git(args: list[str], data: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
    """A read through the git CLI in the hook's directory; a failure is the hook's error."""
    from git_genjob.storage.gitdir import run_git

    proc = run_git(args, data, env)
    if proc.returncode != 0:
        from git_genjob.documents.errors import NotARepository

        raise NotARepository(f"git {args[0]} failed: {proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout


def _pre_commit(args: list[str]) -> int:
    """One writer per path: refuse a hand commit touching a path a live job holds."""
    from git_genjob.storage.gitdir import common_dir, live_tips

    common = common_dir()
    tips = live_tips(common) if common is not None else None
    if tips == {}:
        return EXIT_OK  # no live job holds any path: nothing to check
    holders = _live_job_paths(tips)
    staged = _staged(sorted({p for paths in holders.values() for p in paths}))
    held = [
        f"{path} is held by live job {key}" for key, paths in holders.items() for path in sorted(staged & set(paths))
    ]
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


def _live_job_paths(tips: dict[str, str] | None) -> dict[str, list[str]]:
    """Each live job's allowed paths, without libgit2: the refs as read from their files (else
    from one `git for-each-ref`), each tip's paths from a local memo (`.git/genjob/hook-paths`:
    a tip commit's job.json never changes meaning), the tips it lacks from one `git cat-file
    --batch`. A damaged job holds no paths, and neither does one no planner this work tree's
    `.genjob/` trusts signed (SPEC §11: a keyless remote's job holds up nobody's commit); the
    memo is kept for one trust store and read anew when it changes."""
    if tips is None:
        tips = {}
        for line in _git(["for-each-ref", "--format=%(objectname) %(refname)", JOBS_PREFIX]).decode().splitlines():
            oid, _, ref = line.partition(" ")
            tips[ref[len(JOBS_PREFIX) :]] = oid
    trust = _trust_text()
    stamp = hashlib.sha256(trust[0].encode() + b"\0" + trust[1].encode()).hexdigest()
    memo_path = _memo_path()
    memo = _read_memo(memo_path, stamp)
    at = {key: f"{oid}@{key}" for key, oid in tips.items()}  # a tip holds paths only under its job's key
    missing = sorted(key for key, entry in at.items() if entry not in memo)
    if missing:
        verdicts = {k: v for k, v in memo.items() if k.startswith("v:")}
        memo.update(_paths_at([(tips[key], key) for key in missing], trust, verdicts))
        kept = {entry: memo[entry] for entry in at.values()}
        _write_memo(memo_path, stamp, {**verdicts, **kept})
    return {key: memo[at[key]] for key in sorted(tips)}


def _trust_text() -> tuple[str, str]:
    """`.genjob/allowed_signers` and `.genjob/revoked_keys` of the work tree (git runs a hook at
    its top), as the commit being made will see them."""
    out = []
    for name in ("allowed_signers", "revoked_keys"):
        try:
            with open(os.path.join(".genjob", name), encoding="utf-8", errors="replace") as fh:
                out.append(fh.read())
        except OSError:
            out.append("")
    return out[0], out[1]


def _paths_at(
    tips: list[tuple[str, str]], trust: tuple[str, str], verdicts: dict[str, list[str]]
) -> dict[str, list[str]]:
    """Each tip's paths; `verdicts` ("v:<job.json blob>:<envelope blob>" -> paths) spares the
    signature check (and PyNaCl's import) for a job already judged under this trust store, as
    every event after its submit carries the same two blobs. New verdicts are added to it.
    `tips` are (tip, the key its ref names): under a name that is not its job's key a tip holds
    nothing (a signed job copied under another name, a dropped one say, is not that job).
    Returns "tip@key" -> paths."""
    from git_genjob.documents.errors import GenjobError
    from git_genjob.documents.job import Job

    wanted = "".join(f"{oid}:job.json\n{oid}:job.dsse.json\n" for oid, _ in tips)
    out = _git(["cat-file", "--batch"], wanted.encode())
    pos = 0

    def next_blob() -> tuple[str, bytes | None]:
        nonlocal pos
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3 or header[1] != b"blob":
            return "-", None  # missing
        size = int(header[2])
        data = out[pos : pos + size]
        pos += size + 1
        return header[0].decode(), data

    paths: dict[str, list[str]] = {}
    signers: Any = None
    for oid, key in tips:
        (job_id, data), (env_id, envelope) = next_blob(), next_blob()
        entry = f"{oid}@{key}"
        paths[entry] = []  # no job.json at the tip, a damaged one, or no trusted planner's
        if data is None:
            continue
        verdict = f"v:{job_id}:{env_id}:{key}"
        if verdict in verdicts:
            paths[entry] = verdicts[verdict]
            continue
        verdicts[verdict] = []
        try:
            job = Job.from_bytes(data)
            if job.key != key:
                continue
            if signers is None:
                ensure_site()  # the signature check needs PyNaCl (and no libgit2)
                from git_genjob.documents.keys import parse_revoked, read_allowed_signers

                signers = (read_allowed_signers(trust[0])[0], parse_revoked(trust[1]))
            from git_genjob.documents.job import job_signer

            job_signer(data, envelope, signers[0], signers[1], time.time())
        except GenjobError:
            continue
        paths[entry] = verdicts[verdict] = job.allowed_paths
    return paths


def _memo_path() -> str | None:
    from git_genjob.storage.gitdir import common_dir

    common = common_dir()
    return hook_paths_path(common) if common else None


def _read_memo(path: str | None, stamp: str) -> dict[str, list[str]]:
    """tip id -> allowed paths: a first line `#trust <stamp>` naming the trust store they were
    judged by, then one line `tip<TAB>path<TAB>path...` each (a job path holds no control
    character); another stamp, or anything unreadable, is a miss."""
    memo: dict[str, list[str]] = {}
    try:
        with open(path or "", encoding="utf-8") as fh:
            if fh.readline().rstrip("\n") != f"#trust {stamp}":
                return memo
            for line in fh:
                oid, *paths = line.rstrip("\n").split("\t")
                memo[oid] = paths
    except (OSError, UnicodeDecodeError):
        pass
    return memo


def _write_memo(path: str | None, stamp: str, memo: dict[str, list[str]]) -> None:
    """Best effort (a local speed-up, never shared): a write that fails costs the next hook time."""
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"#trust {stamp}\n")
            fh.writelines(oid + "".join(f"\t{p}" for p in paths) + "\n" for oid, paths in memo.items())
        os.replace(tmp, path)
    except OSError:
        pass


def _staged(paths: list[str]) -> set[str]:
    """Which of `paths` the commit being made changes: the index git commits (GIT_INDEX_FILE
    for `git commit -a`, `git commit PATH` and `--only`, else .git/index) against HEAD, by
    blob id, as `git diff-index --cached` compares them."""
    if not paths:
        return set()
    index_file = os.environ.get("GIT_INDEX_FILE")
    env = {"GIT_INDEX_FILE": os.path.abspath(index_file)} if index_file else None
    from git_genjob.storage.gitdir import run_git

    cmd = ["--literal-pathspecs", "diff-index", "--cached", "--raw", "-z", "--no-renames", "--abbrev=64", "HEAD", "--"]
    proc = run_git([*cmd, *paths], env=env)
    if proc.returncode != 0:  # no HEAD yet (the first commit): every indexed path is new
        listed = _git(["--literal-pathspecs", "ls-files", "-z", "--", *paths], env=env)
        return {p.decode("utf-8", "surrogateescape") for p in listed.split(b"\0") if p}
    fields = proc.stdout.split(b"\0")
    changed = set()
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.split()
        if len(parts) >= 4 and parts[2] != parts[3]:  # a mode-only change moves no content
            changed.add(path.decode("utf-8", "surrogateescape"))
    return changed


def _commit_msg(args: list[str]) -> int:
    """Refuse Genjob-* trailers that no verified receipt backs (read as git reads trailers)."""
    from git_genjob.storage.gitdir import attributions, genjob_trailers_of, may_name_a_job

    with open(args[0], "rb") as fh:
        message = fh.read().decode("utf-8", "surrogateescape")
    if not may_name_a_job(message):
        return EXIT_OK  # no line could be a Genjob-* trailer: no git, no libgit2
    trailers = genjob_trailers_of(message)
    claimed = attributions(message)
    if not trailers and claimed:
        print("git-genjob commit-msg: an attribution no verified receipt backs:", file=sys.stderr)
        for receipt in claimed:
            print(
                f"  - Assisted-by names genjob receipt {receipt}, but the message has no Genjob trailers",
                file=sys.stderr,
            )
        print("hint: genjob commits are made by git genjob apply; remove the Assisted-by line", file=sys.stderr)
        return EXIT_REFUSED
    if not trailers:
        return EXIT_OK
    store = _store()
    from git_genjob.documents.errors import GenjobError
    from git_genjob.landing.verify import check_receipt, trust_from_worktree
    from git_genjob.storage.records import find_job

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
    problems += [
        f"Assisted-by names genjob receipt {r}, the commit's Genjob-Receipt is {trailers.get('Genjob-Receipt')}"
        for r in claimed
        if r != trailers.get("Genjob-Receipt")
    ]
    if problems:
        print("git-genjob commit-msg: Genjob-* trailers that no verified receipt backs:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        print("hint: genjob commits are made by git genjob apply; remove the trailers", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK


PushLine = tuple[str, str, str, str]  # local ref, local id, remote ref, remote id (git's stdin line)


def _pushed(args: list[str]) -> tuple[str, list[PushLine]]:
    """The remote and what is pushed: git's stdin lines, or the pre-commit framework's
    variables (it reads git's stdin itself and hands a hook only PRE_COMMIT_*: one ref, the
    first that sends commits; no PRE_COMMIT_FROM_REF when the whole history is new)."""
    env = os.environ
    if env.get("PRE_COMMIT_REMOTE_NAME") and env.get("PRE_COMMIT_LOCAL_BRANCH"):
        remote = env["PRE_COMMIT_REMOTE_NAME"]
        local_ref = env["PRE_COMMIT_LOCAL_BRANCH"]
        local = (
            env.get("PRE_COMMIT_TO_REF") or _git(["rev-parse", "--verify", f"{local_ref}^{{commit}}"]).decode().strip()
        )
        base = env.get("PRE_COMMIT_FROM_REF") or "0" * len(local)
        return remote, [(local_ref, local, env.get("PRE_COMMIT_REMOTE_BRANCH", ""), base)]
    remote = args[0] if args else "origin"
    lines = [parts for parts in (line.split() for line in sys.stdin.read().splitlines()) if len(parts) == 4]
    return remote, [(a, b, c, d) for a, b, c, d in lines]


def _may_push_a_genjob_commit(remote: str, local_sha: str, remote_sha: str) -> bool:
    """Whether the commits this ref sends may name a job: one `git rev-list` over the same
    range the full check walks, for a message line that could hold a Genjob-* trailer."""
    from git_genjob.storage.gitdir import run_git

    hide = [] if set(remote_sha) == {"0"} else [remote_sha]
    proc = run_git(
        [
            "rev-list",
            "-n1",
            "--ignore-missing",
            "--regexp-ignore-case",
            "--extended-regexp",
            "--grep=^[[:space:]]*(genjob-|assisted-by:.*genjob)",
            local_sha,
            "--not",
            f"--glob=refs/remotes/{remote}/*",
            *hide,
        ]
    )
    return proc.returncode != 0 or bool(proc.stdout.strip())  # when git cannot say, check in full


def _pre_push(args: list[str]) -> int:
    """Refuse pushing genjob commits that fail audit or whose note the remote will not have."""
    remote, pushed = _pushed(args)
    checked = [
        line for line in pushed if not line[2].startswith((GENJOB_PREFIX, NOTES_PREFIX)) and set(line[1]) != {"0"}
    ]
    summaries = [line for line in pushed if line[2] == NOTES_REF and set(line[1]) != {"0"}]
    if not summaries and not any(_may_push_a_genjob_commit(remote, local, base) for _l, local, _r, base in checked):
        return EXIT_OK  # no pushed commit can name a job, no summary note is pushed: libgit2 is never loaded
    store = _store()
    pushing_notes = {ref for ref in NOTES_REFS if any(p[2] == ref and p[0] != "(delete)" for p in pushed)}
    notes_on_remote = _RemoteNotes(store, remote)
    problems = []
    for _local_ref, local_sha, _remote_ref, remote_sha in summaries:
        problems += _check_pushed_notes(store, local_sha, remote_sha)
    for _local_ref, local_sha, _remote_ref, remote_sha in checked:
        problems += _check_pushed(store, remote, local_sha, remote_sha, pushing_notes, notes_on_remote)
    if problems:
        print("git-genjob pre-push: refusing to push genjob commits that fail audit:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK


class _RemoteNotes:
    """Which commits the remote's refs/notes/genjob and refs/notes/genjob-receipts annotate
    (asked once, with one ls-remote, only if needed)."""

    def __init__(self, store: Store, remote: str):
        self.store, self.remote = store, remote
        self._notes: dict[str, set[str]] | None = None

    def has(self, ref: str, commit_id: str) -> bool:
        if self._notes is None:
            self._notes = self._load()
        return commit_id in self._notes.get(ref, set())

    def _load(self) -> dict[str, set[str]]:
        import subprocess

        from git_genjob.storage.gitdir import clean_env
        from git_genjob.storage.notes import all_notes

        proc = subprocess.run(
            ["git", "ls-remote", self.remote, *NOTES_REFS], capture_output=True, text=True, env=clean_env()
        )
        out: dict[str, set[str]] = {}
        for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
            oid, _, ref = line.partition("\t")
            if ref in NOTES_REFS and self.store.has(oid):
                out[ref] = set(all_notes(self.store, self.store.get_commit(oid).tree))
        return out


def _check_pushed(
    store: Store, remote: str, local_sha: str, remote_sha: str, pushing_notes: set[str], notes: _RemoteNotes
) -> list[str]:
    from git_genjob.landing.audit import audit_one
    from git_genjob.landing.verify import TrustStore, trust_from_tree
    from git_genjob.storage.gitdir import read_commit_trailers
    from git_genjob.storage.notes import read_note

    problems: list[str] = []
    tip_trust: TrustStore | None = None
    commits = list(_new_commits(store, remote, local_sha, remote_sha))
    read_commit_trailers(store.gitdir, [(str(c.id), c.message) for c in commits])
    for commit in commits:
        tip_trust = tip_trust or trust_from_tree(store, store.get_commit(local_sha).tree)
        checked = audit_one(store, commit, tip_trust)
        if checked is None:
            continue
        short = str(commit.id)[:12]
        problems += [f"{short}: {p}" for p in checked.problems]
        if checked.ok and checked.merged:  # SPEC §11: say which pushed commits audit proved as merges
            print(f"git-genjob pre-push: {short} {checked.provenance}", file=sys.stderr)
        for ref in NOTES_REFS:  # the summary and, since SPEC §11, the envelope in its own ref
            if (
                read_note(store, commit.id, ref) is not None
                and ref not in pushing_notes
                and not notes.has(ref, str(commit.id))
            ):
                problems.append(f"{short}: its note is not on {remote} ({ref}; run git genjob push first)")
    return problems


def _check_pushed_notes(store: Store, local_sha: str, remote_sha: str) -> list[str]:
    """A push of refs/notes/genjob: every summary note it adds or changes must be the rendering
    of the verified receipt on its commit (landing.summary), else it is a forged summary."""
    import pygit2

    from git_genjob.documents.errors import GenjobError
    from git_genjob.landing.audit import audit_one
    from git_genjob.landing.summary import FORGED
    from git_genjob.landing.verify import trust_from_tree
    from git_genjob.storage.notes import all_notes

    new = all_notes(store, store.get_commit(local_sha).tree)
    old = (
        all_notes(store, store.get_commit(remote_sha).tree)
        if set(remote_sha) != {"0"} and store.has(remote_sha)
        else {}
    )
    head = store.ref_target("HEAD")
    tip_trust = trust_from_tree(store, store.get_commit(head).tree) if head is not None else None
    problems = []
    for obj, blob in sorted(new.items()):
        if old.get(obj) == blob:
            continue
        if not store.has(obj):
            problems.append(f"{obj[:12]}: {FORGED}: it annotates an object this repository does not have")
            continue
        try:
            commit = store.get_commit(pygit2.Oid(hex=obj))
        except (GenjobError, ValueError, KeyError):
            problems.append(f"{obj[:12]}: {FORGED}: it annotates an object that is not a commit")
            continue
        checked = audit_one(store, commit, tip_trust or trust_from_tree(store, commit.tree))
        forged = [p for p in (checked.problems if checked else []) if p.startswith(FORGED)]
        problems += [f"{obj[:12]}: {p} ({NOTES_REF})" for p in forged]
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

    store = _store()
    from git_genjob.documents.config import read_config

    command = read_config(store).pre_apply
    if not command:
        return EXIT_OK
    return subprocess.run(["sh", "-c", command], cwd=store.workdir or store.gitdir).returncode
