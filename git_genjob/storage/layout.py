"""Where genjob keeps things in a repository, written once: the ref names (SPEC §3, §11), a
job's ref and archive shard, and one function per file under `.git/genjob/`.

Loads no libgit2 (only os and hashlib): the fast paths and the hooks read these names as well as
the store, and every reader imports them from here instead of copying a string.
"""

from __future__ import annotations

import hashlib
import os

# -- refs ----------------------------------------------------------------------------------
GENJOB_PREFIX = "refs/genjob/"  # everything genjob writes except the notes
JOBS_PREFIX = GENJOB_PREFIX + "jobs/"  # one ref per live job: its event chain
ARCHIVE_REF = GENJOB_PREFIX + "archive"  # the finished jobs, sharded
REPLAYS_REF = GENJOB_PREFIX + "replays"  # the model-answer cache
NOTES_PREFIX = "refs/notes/"
NOTES_REF = NOTES_PREFIX + "genjob"  # the human summary `git log` shows (SPEC §11)
RECEIPTS_REF = NOTES_PREFIX + "genjob-receipts"  # the receipt envelope of each applied commit (SPEC §11)
NOTES_REFS = (NOTES_REF, RECEIPTS_REF)
LEDGER_REFS = (
    ARCHIVE_REF,
    REPLAYS_REF,
    NOTES_REF,
    RECEIPTS_REF,
)  # shared, merged as unions: never moved backwards by genjob
TRACK = "refs/genjob-remotes/"  # where a remote's genjob refs are fetched to: TRACK + REMOTE/…

ROWS_DIR = "_rows"  # in the archive's tree beside the shards: one blob per shard, a status row per archived job


def job_ref(key: str) -> str:
    """The ref of live job `key`."""
    return JOBS_PREFIX + key


def shard(key: str) -> str:
    """The archive shard (two hex digits) a job key falls in."""
    return hashlib.sha256(key.encode()).hexdigest()[:2]


def is_shard(name: str) -> bool:
    """Whether an archive tree entry's name is a shard's."""
    return len(name) == 2 and all(c in "0123456789abcdef" for c in name)


# -- .git/genjob/: local files, never shared ----------------------------------------------------
# `common` is the git common directory (a linked worktree's files live in its main repository's).


def genjob_dir(common: str) -> str:
    """`.git/genjob/`, the folder of every file below."""
    return os.path.join(common, "genjob")


def kept_path(common: str, ref: str) -> str:
    """The last value genjob itself gave shared ledger ref `ref` (Store.kept_tip)."""
    return os.path.join(genjob_dir(common), "kept", ref.replace("/", "%"))


def writers_dir(common: str) -> str:
    """One record per git-genjob process about to lock refs (storage/locks.py)."""
    return os.path.join(genjob_dir(common), "writers")


def rows_checked_path(common: str) -> str:
    """The archive rows blobs `status --all` has checked once (planner/queue.py)."""
    return os.path.join(genjob_dir(common), "rows-checked")


def status_rows_path(common: str) -> str:
    """The live jobs' `status` rows, by tip id (planner/queue.py)."""
    return os.path.join(genjob_dir(common), "status-rows")


def status_memo_path(common: str) -> str:
    """The kept output of `status` (planner/statusfast.py)."""
    return os.path.join(genjob_dir(common), "status-out")


def show_memo_path(common: str, key: str) -> str:
    """The kept output of `show KEY` (planner/statusfast.py)."""
    return os.path.join(genjob_dir(common), "show-out", key)


def verify_memo_path(common: str, key: str) -> str:
    """The kept verdict of `verify KEY` (landing/fast.py)."""
    return os.path.join(genjob_dir(common), "verify-out", key)


def log_memo_path(common: str) -> str:
    """The kept audit of `git log`'s commits (landing/fast.py)."""
    return os.path.join(genjob_dir(common), "log-out")


def hook_paths_path(common: str) -> str:
    """The hooks' allowed paths per live job tip (landing/hooks.py)."""
    return os.path.join(genjob_dir(common), "hook-paths")


def applying_path(common: str, key: str) -> str:
    """The intent `apply KEY` writes before it lands (landing/apply.py)."""
    return os.path.join(genjob_dir(common), "applying", key)


def apply_lock_path(common: str) -> str:
    """The flock one `apply` at a time holds (landing/apply.py)."""
    return os.path.join(genjob_dir(common), "apply.flock")


def replay_local_path(common: str) -> str:
    """The replay events this clone wrote (replay/cache.py)."""
    return os.path.join(genjob_dir(common), "replay-local")


def replay_served_path(common: str, name: str) -> str:
    """A replay answer the fast path may serve, or its `config` (replay/fast.py)."""
    return os.path.join(genjob_dir(common), "replay-served", name)


def asking_path(common: str, fingerprint: str) -> str:
    """The flock of one request being asked (replay/cache.py)."""
    return os.path.join(genjob_dir(common), "asking", fingerprint)


def hits_log_path(gitdir: str) -> str:
    """One line per replay hit (replay/cache.py, replay/fast.py)."""
    return os.path.join(genjob_dir(gitdir), "hits.log")


def gateway_journal_path(common: str, job_key: str) -> str:
    """The model gateway's journal of a job's calls (worker/gateway/calls.py)."""
    return os.path.join(genjob_dir(common), "gateway", f"{job_key}.jsonl")


def gateway_answers_dir(common: str) -> str:
    """Answer documents the gateway's journal names, not yet folded into the replay cache."""
    return os.path.join(genjob_dir(common), "gateway", "answers")
