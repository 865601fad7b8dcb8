"""Hook installation (chaining the user's own hooks) and the hook implementations (SPEC §9)."""

from __future__ import annotations

import hashlib
import os
import sys
import time

import git_genjob
from git_genjob.documents.errors import (
    EXIT_CONFLICT,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    BadInput,
    GenjobError,
    NotARepository,
    format_error,
)
from git_genjob.storage.gitdir import attributions, common_dir, genjob_trailers_of, live_tips, may_name_a_job, run_git
from git_genjob.storage.layout import GENJOB_PREFIX, JOBS_PREFIX, NOTES_PREFIX, NOTES_REF, NOTES_REFS, hook_paths_path

TYPE_CHECKING = False  # typing itself costs a hook ~5 ms to import; mypy reads this name as typing's
if TYPE_CHECKING:
    from typing import Any

    from git_genjob.storage.store import Store

MARKER = "# git-genjob hook:"
HOOKS = ("pre-commit", "commit-msg", "pre-push", "pre-apply")


def _template() -> str:
    from importlib.resources import files

    return (files("git_genjob") / "resources" / "hook.sh").read_text(encoding="utf-8")


def install_hooks(store: Store, force: bool = False) -> list[str]:
    """Write genjob's hook scripts; an existing user hook is kept as `<name>.genjob-chained` and run first.

    A hooks directory inside the work tree (a tracked `core.hooksPath`) is shared: its scripts
    name no path of this machine, and this clone's interpreter goes into its own config
    (`genjob.hookPython`, `genjob.hookPythonPath`) instead. A script that already says what
    would be written is left untouched."""
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


def hook_states(store: Store) -> dict[str, str]:
    """Each hook's state here, for `doctor`: `missing`, `foreign` (a script that is not genjob's),
    `current` (what `init --hooks` would write now, for this package and interpreter) or `stale`
    (genjob's, written for another install)."""
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
            raise BadInput(f"cannot write a hook naming {value!r}", "install git-genjob under a plainer path")
    return _template().replace("@HOOK@", name).replace("@PYTHONPATH@", pythonpath).replace("@PYTHON@", python)


def package_parent() -> str:
    """The directory that holds the git_genjob package (site-packages, or an editable checkout)."""
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


def _git(args: list[str], data: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
    """A read through the git CLI in the hook's directory; a failure is the hook's error."""
    proc = run_git(args, data, env)
    if proc.returncode != 0:
        raise NotARepository(f"git {args[0]} failed: {proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout


def _pre_commit(args: list[str]) -> int:
    """One writer per path: refuse a hand commit touching a path a live job holds."""
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
        tips = _listed_tips()
    trust = _trust_text()
    at = {key: f"{oid}@{key}" for key, oid in tips.items()}  # a tip holds paths only under its job's key
    memo = _memo_holding(tips, at, trust)
    return {key: memo[at[key]] for key in sorted(tips)}


def _memo_holding(tips: dict[str, str], at: dict[str, str], trust: tuple[str, str]) -> dict[str, list[str]]:
    """The memo of this trust store with every entry of `at`: those it lacks read from git, then
    written back with the planners' verdicts and only the entries still live."""
    stamp = hashlib.sha256(trust[0].encode() + b"\0" + trust[1].encode()).hexdigest()
    memo_path = _memo_path()
    memo = _read_memo(memo_path, stamp)
    missing = sorted(key for key, entry in at.items() if entry not in memo)
    if missing:
        verdicts = {k: v for k, v in memo.items() if k.startswith("v:")}
        memo.update(_paths_at([(tips[key], key) for key in missing], trust, verdicts))
        kept = {entry: memo[entry] for entry in at.values()}
        _write_memo(memo_path, stamp, {**verdicts, **kept})
    return memo


def _listed_tips() -> dict[str, str]:
    """{key: tip} of every live job, from one `git for-each-ref` (the refs' files were not readable)."""
    tips = {}
    for line in _git(["for-each-ref", "--format=%(objectname) %(refname)", JOBS_PREFIX]).decode().splitlines():
        oid, _, ref = line.partition(" ")
        tips[ref[len(JOBS_PREFIX) :]] = oid
    return tips


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
    from git_genjob.documents.job import Job, job_signer  # dataclasses: ~9 ms a hook with nothing to check never pays

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
            job_signer(data, envelope, signers[0], signers[1], time.time())
        except GenjobError:
            continue
        paths[entry] = verdicts[verdict] = job.allowed_paths
    return paths


def _memo_path() -> str | None:
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
    ensure_site()
    from git_genjob.landing import hookcheck

    problems = hookcheck.trailer_problems(trailers)
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
    checked, summaries = _to_check(pushed)
    if not summaries and not any(_may_push_a_genjob_commit(remote, local, base) for _l, local, _r, base in checked):
        return EXIT_OK  # no pushed commit can name a job, no summary note is pushed: libgit2 is never loaded
    ensure_site()
    from git_genjob.landing import hookcheck

    pushing_notes = {ref for ref in NOTES_REFS if any(p[2] == ref and p[0] != "(delete)" for p in pushed)}
    problems = hookcheck.push_problems(remote, checked, summaries, pushing_notes)
    if problems:
        print("git-genjob pre-push: refusing to push genjob commits that fail audit:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK


def _to_check(pushed: list[PushLine]) -> tuple[list[PushLine], list[PushLine]]:
    """(the pushed branches and tags, the pushed summary notes), deletions left out."""
    kept = [line for line in pushed if set(line[1]) != {"0"}]
    checked = [line for line in kept if not line[2].startswith((GENJOB_PREFIX, NOTES_PREFIX))]
    return checked, [line for line in kept if line[2] == NOTES_REF]


def _pre_apply(args: list[str]) -> int:
    """Run `[hooks] pre_apply` from .genjob/config.toml (GENJOB_OUTPUTS is set by apply)."""
    import subprocess

    ensure_site()
    from git_genjob.landing import hookcheck

    command, cwd = hookcheck.pre_apply_command()
    if not command:
        return EXIT_OK
    return subprocess.run(["sh", "-c", command], cwd=cwd).returncode
