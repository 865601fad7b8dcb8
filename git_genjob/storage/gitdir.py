"""What needs no libgit2 (the hooks' fast path): the repository's directories, the live job refs read
from their files, the environment and spawning of a child git, trailers and dates as git reads
them, and the repository formats libgit2 cannot open (refused before it tries)."""

from __future__ import annotations

import os
from collections.abc import Callable

from git_genjob.documents.errors import BadInput
from git_genjob.storage.layout import JOBS_PREFIX

# The hooks import this module: re and subprocess load only where they are used.

# GIT_* variables a child git may inherit: how to reach and authenticate to remotes, identity,
# config given with `git -c`, tracing. Everything else (GIT_DIR, GIT_INDEX_FILE,
# GIT_WORK_TREE, GIT_OBJECT_DIRECTORY, ... which a hook's environment carries) would point the
# child at another repository than the one genjob opened; the allow-list is pre-commit's
# `no_git_env` rule, so a variable git adds later is dropped, not passed.
GIT_ENV_KEEP = frozenset(
    {
        "GIT_ALLOW_PROTOCOL",
        "GIT_ASKPASS",
        "GIT_AUTHOR_DATE",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_NAME",
        "GIT_COMMITTER_DATE",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_SYSTEM",
        "GIT_CURL_VERBOSE",
        "GIT_EXEC_PATH",
        "GIT_HTTP_PROXY_AUTHMETHOD",
        "GIT_HTTP_USER_AGENT",
        "GIT_PROTOCOL_FROM_USER",
        "GIT_PROXY_COMMAND",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "GIT_SSL_CERT",
        "GIT_SSL_KEY",
        "GIT_SSL_NO_VERIFY",
        "GIT_TERMINAL_PROMPT",
    }
)
GIT_ENV_KEEP_PREFIXES = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "GIT_TRACE")


def clean_env() -> dict[str, str]:
    """The environment for a child git: GIT_* only from the allow-list above."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") or k in GIT_ENV_KEEP or k.startswith(GIT_ENV_KEEP_PREFIXES)
    }
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    # Objects by their id, as libgit2 reads them and as `git fsck` checks them: a local
    # refs/replace/ ref must not swap the bytes a receipt names (or a trailer's commit) for
    # others in the reads that go through git (trailers, outputs above 4 MiB, apply's index).
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    return env


class GitRun:
    """What a child git returned: exit code, stdout, stderr (bytes)."""

    __slots__ = ("returncode", "stderr", "stdout")

    def __init__(self, returncode: int, stdout: bytes, stderr: bytes) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_git(args: list[str], data: bytes | None = None, env: dict[str, str] | None = None) -> GitRun:
    """A read-only child git in the current directory with `clean_env()` (plus `env`).

    Without stdin data it is spawned directly (os.posix_spawnp, one pipe): importing
    subprocess costs a hook more than the git it runs. A failure is run again through
    subprocess for git's message, which is why only reads come here."""
    full_env = {**clean_env(), **(env or {})}
    if data is None and hasattr(os, "posix_spawnp"):
        r, w = os.pipe()
        try:
            pid = os.posix_spawnp(
                "git",
                ["git", *args],
                full_env,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, w, 1),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
            )
        finally:
            os.close(w)
        chunks = []
        try:
            while chunk := os.read(r, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(r)
            status = os.waitpid(pid, 0)[1]
        if os.waitstatus_to_exitcode(status) == 0:
            return GitRun(0, b"".join(chunks), b"")
    import subprocess

    proc = subprocess.run(
        ["git", *args],
        input=data,
        capture_output=True,
        env=full_env,
        stdin=None if data is not None else subprocess.DEVNULL,
    )
    return GitRun(proc.returncode, proc.stdout, proc.stderr)


def common_dir(start: str | None = None) -> str | None:
    """The common git directory around `start` (honours GIT_DIR / GIT_COMMON_DIR as git sets them)."""
    env_common = os.environ.get("GIT_COMMON_DIR")
    if env_common:
        return os.path.abspath(env_common)
    gitdir = os.environ.get("GIT_DIR")
    if gitdir:
        return resolve_common(os.path.abspath(gitdir))
    path = os.path.abspath(start or os.getcwd())
    while True:
        found = _common_at(path)
        if found is not None:
            return found
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _common_at(path: str) -> str | None:
    """The common git directory of the repository at `path` (its `.git` directory or gitfile,
    or `path` itself when bare), or None when `path` holds none."""
    dotgit = os.path.join(path, ".git")
    if os.path.isdir(dotgit):
        return resolve_common(dotgit)
    if os.path.isfile(dotgit):
        with open(dotgit, encoding="utf-8") as fh:
            line = fh.read().strip()
        if line.startswith("gitdir:"):
            return resolve_common(os.path.normpath(os.path.join(path, line[len("gitdir:") :].strip())))
    if os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "refs")):
        return path  # a bare repository
    return None


def resolve_common(gitdir: str) -> str:
    """The common directory of a git directory: itself, or what its `commondir` file names (a
    linked worktree's). The one place this is resolved."""
    common = os.path.join(gitdir, "commondir")
    if os.path.exists(common):
        with open(common, encoding="utf-8") as fh:
            return os.path.normpath(os.path.join(gitdir, fh.read().strip()))
    return gitdir


def live_keys(common: str) -> list[str]:
    """Keys of the live job refs: a directory listing plus packed-refs, no ref file reads."""
    keys: set[str] = set()
    try:
        loose = os.path.join(common, JOBS_PREFIX)
        keys |= {e.name for e in os.scandir(loose) if e.is_file() and not e.name.endswith(".lock")}
    except FileNotFoundError:
        pass
    return sorted(keys | set(_packed_job_tips(common)))


def live_tips(common: str) -> dict[str, str] | None:
    """{key: tip id} of the live job refs, read from the ref files as git keeps them (a loose
    ref over its packed line), or None when one is not a plain object id (git must say)."""
    tips = _packed_job_tips(common)
    loose = _loose_job_tips(common)
    if loose is None:
        return None
    tips.update(loose)
    hexdigits = set("0123456789abcdef")
    if any(len(oid) not in (40, 64) or not set(oid) <= hexdigits for oid in tips.values()):
        return None
    return tips


def _packed_job_tips(common: str) -> dict[str, str]:
    """{key: the id on its line} of the live job refs in packed-refs."""
    tips: dict[str, str] = {}
    try:
        with open(os.path.join(common, "packed-refs"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                oid, _, name = line.rstrip("\n").partition(" ")
                if name.startswith(JOBS_PREFIX):
                    tips[name[len(JOBS_PREFIX) :]] = oid
    except FileNotFoundError:
        pass
    return tips


def _loose_job_tips(common: str) -> dict[str, str] | None:
    """{key: the text of its file} of the loose live job refs, or None when one is not a readable file."""
    try:
        entries = list(os.scandir(os.path.join(common, JOBS_PREFIX)))
    except FileNotFoundError:
        entries = []
    tips: dict[str, str] = {}
    for e in entries:
        if e.name.endswith(".lock"):
            continue
        if not e.is_file():
            return None
        try:
            with open(e.path, encoding="ascii") as fh:
                tips[e.name] = fh.read().strip()
        except (OSError, UnicodeDecodeError):
            return None
    return tips


TRAILERS = ("Genjob-Key", "Genjob-Job", "Genjob-Receipt", "Genjob-Signer", "Genjob-Worker")  # every applied commit's


def parse_trailers(message: str) -> dict[str, str]:
    """The trailer block at the end of a commit message ({key: first value})."""
    out: dict[str, str] = {}
    for line in message.strip().splitlines()[::-1]:
        if not line.strip():
            break
        if ": " in line:
            k, v = line.split(": ", 1)
            out.setdefault(k.strip(), v.strip())
    return out


# A line git could read as a Genjob-* trailer, or a squash body's trailer line: the cheap test
# that lets a message without one skip asking git (git reads a trailer key from the start of a
# line, case-insensitively; a squash body may indent it).
def may_name_a_job(message: str) -> bool:
    """Whether a line of `message` could be a Genjob-* trailer or genjob's Assisted-by."""
    import re

    return re.search(r"^[ \t]*(genjob-|assisted-by:.*genjob)", message, re.IGNORECASE | re.MULTILINE) is not None


def attributions(message: str) -> list[str]:
    """The receipts an `Assisted-by: … via genjob (receipt sha256:…)` line names (SPEC §12.2:
    each must be the commit's own verified Genjob-Receipt), in any case and spacing."""
    import re

    pattern = r"^[ \t]*assisted-by[ \t]*:.*\bgenjob\b.*?\breceipt[ \t:]+(sha256:[0-9a-fA-F]*\S*?)[ \t)]*$"
    return [m.group(1).rstrip(")") for m in re.finditer(pattern, message, re.IGNORECASE | re.MULTILINE)]


# A trailer key is letters, digits and dashes to git (trailer.c find_separator); what follows it
# in --parse output is one separator character from trailer.separators, then the value.
PARSED_TRAILER = r"^([A-Za-z0-9-]+)\s*[^A-Za-z0-9\s-](.*)$"


def canonical_trailer_key(key: str) -> str:
    """`genjob-key`, `GENJOB-KEY` -> `Genjob-Key`: git compares trailer keys case-insensitively."""
    return "-".join(part[:1].upper() + part[1:].lower() for part in key.split("-"))


def git_trailers(message: str, gitdir: str | None = None) -> list[tuple[str, str]]:
    """The trailers of a commit message exactly as git reads them (`git interpret-trailers
    --parse`, as `git log --format=%(trailers)` does: case-insensitive keys, the separators of
    `trailer.separators`, continuation lines unfolded, comment lines and a scissors line
    honoured), in message order, keys as written."""
    import re

    where = [f"--git-dir={gitdir}"] if gitdir else []  # whose trailer.* config applies (else: the cwd's)
    proc = run_git(
        [*where, "interpret-trailers", "--parse", "--no-divider"], message.encode("utf-8", "surrogateescape")
    )
    if proc.returncode != 0:
        return []
    out = []
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        m = re.match(PARSED_TRAILER, line)  # git prints `key<its first separator> value`
        if m:
            out.append((m.group(1), m.group(2).strip()))
    return out


def genjob_trailers_of(message: str, gitdir: str | None = None) -> dict[str, str]:
    """The `Genjob-*` trailers of a message as git reads them ({canonical key: value}; the last
    of a repeated key wins, as parse_trailers reads them). A message with no line that could
    hold one costs no git process."""
    if not may_name_a_job(message):
        return {}
    out: dict[str, str] = {}
    for key, value in git_trailers(message, gitdir):
        if key.lower().startswith("genjob-"):
            out[canonical_trailer_key(key)] = value
    return out


# (git dir, commit id) -> its Genjob-* trailers: an id never changes meaning, the git dir says
# whose trailer.* config read it (tests pin dates, so two repositories may hold the same commit).
_BY_COMMIT: dict[tuple[str, str], dict[str, str]] = {}


def genjob_trailers_of_commit(oid: str, message: str, gitdir: str | None = None) -> dict[str, str]:
    """`genjob_trailers_of` for a commit, remembered by id (see `read_commit_trailers`)."""
    key = (gitdir or "", oid)
    if key not in _BY_COMMIT:
        _BY_COMMIT[key] = genjob_trailers_of(message, gitdir)
    return _BY_COMMIT[key]


def read_commit_trailers(gitdir: str, commits: list[tuple[str, str]]) -> None:
    """Read the Genjob-* trailers of many (id, message) commits in one `git log --no-walk
    --stdin` (what `%(trailers:only,unfold)` shows), for `genjob_trailers_of_commit` to find:
    an audit of a range asks git once, not once per commit."""
    wanted = _commits_to_ask(gitdir, commits)
    if not wanted:
        return
    proc = run_git(
        [f"--git-dir={gitdir}", "log", "--no-walk=unsorted", "--stdin", "--format=%x00%H%x00%(trailers:only,unfold)"],
        "\n".join(wanted).encode() + b"\n",
    )
    if proc.returncode != 0:
        return  # each commit is then asked on its own
    fields = proc.stdout.decode("utf-8", "replace").split("\0")
    for oid, block in zip(fields[1::2], fields[2::2], strict=False):
        _BY_COMMIT[(gitdir, oid)] = _genjob_trailers_in(block)


def _commits_to_ask(gitdir: str, commits: list[tuple[str, str]]) -> list[str]:
    """The ids of `commits` not read yet whose message may hold a Genjob-* trailer; each other
    new one is remembered as holding none."""
    new = [(oid, message) for oid, message in commits if (gitdir, oid) not in _BY_COMMIT]
    wanted = [oid for oid, message in new if may_name_a_job(message)]
    _BY_COMMIT.update({(gitdir, oid): {} for oid, message in new if not may_name_a_job(message)})
    return wanted


def _genjob_trailers_in(block: str) -> dict[str, str]:
    """The Genjob-* trailers of a `%(trailers:only,unfold)` block ({canonical key: value})."""
    import re

    out: dict[str, str] = {}
    for line in block.splitlines():
        m = re.match(PARSED_TRAILER, line)
        if m and m.group(1).lower().startswith("genjob-"):
            out[canonical_trailer_key(m.group(1))] = m.group(2).strip()
    return out


# -- what libgit2 cannot open, and git's dates, read without it ------------------------------
def repository_extensions(gitdir: str) -> dict[str, str]:
    """`[extensions]` of the repository's config, names lowercased (as git reads them)."""
    config_path = os.path.join(resolve_common(gitdir), "config")
    try:
        with open(config_path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return {}
    out: dict[str, str] = {}
    section = ""
    for raw in lines:
        line = raw.split("#", 1)[0].split(";", 1)[0].strip()
        if line.startswith("["):
            section = line[1:].split("]", 1)[0].split('"', 1)[0].strip().lower()
            line = line.split("]", 1)[1].strip() if "]" in line else ""
        if section == "extensions" and "=" in line:
            name, value = line.split("=", 1)
            out[name.strip().lower()] = value.strip().strip('"').lower()
    return out


def sha256_refusal(gitdir: str, detail: str = "extensions.objectFormat=sha256") -> BadInput:
    """The refusal of a SHA-256 repository (libgit2 reads SHA-1 ones only)."""
    return BadInput(
        f"repository {gitdir} uses SHA-256 object names ({detail}), which the libgit2 that git genjob "
        "reads repositories with cannot open",
        "git genjob works in SHA-1 repositories (git's default): see docs/exit-codes.md",
    )


def refuse_unsupported(gitdir: str) -> None:
    """One clear refusal, before libgit2's raw error, for a repository it cannot open."""
    ext = repository_extensions(gitdir)
    if ext.get("refstorage") == "reftable":
        raise BadInput(
            f"repository {gitdir} uses extensions.refStorage=reftable, which libgit2 cannot open",
            "use a repository with the files ref backend (git clone --ref-format=files)",
        )
    if ext.get("objectformat", "sha1") != "sha1" or ext.get("compatobjectformat", "sha1") != "sha1":
        raise sha256_refusal(gitdir)


def git_identity(role: str, config: Callable[[str], str | None], required: bool) -> tuple[str, str]:
    """(name, email) for `role` ("author" or "committer") as git reads them: GIT_<ROLE>_NAME /
    _EMAIL, else user.name / user.email from `config`. Without one, `required` refuses (exit 2);
    otherwise the fallback is git-genjob <genjob@localhost>."""
    upper = role.upper()
    name = os.environ.get(f"GIT_{upper}_NAME") or config("user.name")
    email = os.environ.get(f"GIT_{upper}_EMAIL") or config("user.email")
    if required and not (name and email):
        raise BadInput("no git identity", 'set one: git config user.name "…"; git config user.email …')
    return name or "git-genjob", email or "genjob@localhost"


def git_role_date(role: str) -> tuple[int, int] | None:
    """GIT_<ROLE>_DATE as git_date reads it, or None (unset or empty: now)."""
    variable = f"GIT_{role.upper()}_DATE"
    when = os.environ.get(variable)
    return git_date(when, variable) if when else None


def git_date(value: str, what: str) -> tuple[int, int]:
    """(unix seconds, offset in minutes) of a date as git takes it in GIT_*_DATE: its own
    `<seconds> <+hhmm>` (or `@<seconds>`), RFC 2822 or ISO 8601; anything else exits 2."""
    raw = value.strip().removeprefix("@")
    parts = raw.split()
    try:
        if parts and parts[0].isdigit() and len(parts) <= 2:
            return _raw_date(parts)
        return _text_date(raw)
    except ValueError:
        raise BadInput(
            f"{what}={value!r} is not a date git understands", 'e.g. "1700000000 +0000" or an ISO 8601 time'
        ) from None


def _raw_date(parts: list[str]) -> tuple[int, int]:
    """git's own `<seconds> [<+hhmm>]` (no zone: +0000); ValueError for a zone git would not take."""
    zone = parts[1] if len(parts) == 2 else "+0000"
    if len(zone) != 5 or zone[0] not in "+-" or not zone[1:].isdigit():
        raise ValueError(zone)
    minutes = int(zone[1:3]) * 60 + int(zone[3:])
    return int(parts[0]), -minutes if zone[0] == "-" else minutes


def _text_date(raw: str) -> tuple[int, int]:
    """An RFC 2822 or ISO 8601 date (without a zone: local time, as git reads one); else ValueError."""
    import datetime  # with email.utils, only where a date is given: the hooks import this module
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        when = datetime.datetime.fromisoformat(raw)
    if when.tzinfo is None:
        when = when.astimezone()  # a local time, as git reads one
    offset = when.utcoffset()
    assert offset is not None
    return int(when.timestamp()), int(offset.total_seconds() // 60)
