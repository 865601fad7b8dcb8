"""`git genjob ask` answered from the replay cache without libgit2 or click (issue 24).

The slow path (replay/commands.py through cli) decides every answer. After it serves a replay
hit it writes a derived file, `.git/genjob/replay-served/<fingerprint>`: the answer it served,
stamped with everything that decision read — the value of refs/genjob/replays (the events),
HEAD's value (the trust store committed there), the state of `.git/genjob/replay-local` (the
events this clone wrote), and the earliest time at which a trusted key's validity window opens
or closes. `try_ask` serves that answer only while every stamp still holds, reading the refs
from their files as git keeps them; whatever it cannot decide that way (a linked worktree, an
`[extensions]` or `core.worktree` config, a symbolic ref, stdin, an option it does not know, a
damaged file) returns None and the slow path runs. So it never serves what the slow path would
refuse: it serves only what the slow path served from the same inputs.

`.genjob/config.toml` decides the fingerprint (its normalize rules): the rules the slow path
read are kept in `replay-served/config`, stamped with the file's sha256 (or, when there is no
such file, with the index's identity, since a sparse checkout reads it from there).

The request, its fingerprint, the parse of `--endpoint` and the hits log line are the slow
path's own (replay/request.py), and the answer is written by planner/userfiles.py's
write_atomic; with the memo's parts (storage/memo.py) they import os, sys, hashlib, json and re
only (tests/replay/test_ask_fast.py checks that a hit loads neither libgit2 nor click).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import TYPE_CHECKING

from git_genjob.documents.errors import BadInput
from git_genjob.planner.userfiles import write_atomic
from git_genjob.replay.request import ask_request, fingerprint, log_hit, parse_endpoint
from git_genjob.storage.fastrefs import Refs, repo_dirs
from git_genjob.storage.layout import REPLAYS_REF, replay_local_path, replay_served_path
from git_genjob.storage.memo import file_stamp, within, write_derived

if TYPE_CHECKING:
    # (work tree, git directory, stamp, config key) as `before` took them
    Taken = tuple[str, str, dict[str, str], dict[str, str | None] | None]

ANSWER_MAX = 1 << 20  # larger answers are left to the slow path
CONFIG = ".genjob/config.toml"
_OPTIONS = ("--endpoint", "--model", "--prompt-file", "--out-file", "--mode", "--key", "--timeout")


# -- what a replay decision read --------------------------------------------------------------
def stamp(gitdir: str) -> dict[str, str] | None:
    """What a replay decision read besides the prompt: None when it cannot be read cheaply."""
    refs = Refs(gitdir)
    out = {
        "replays": refs.get(REPLAYS_REF),
        "head": refs.head(),
        "local": file_stamp(replay_local_path(gitdir)),
    }
    if any(v is None for v in out.values()):
        return None
    return {k: str(v) for k, v in out.items()}


def _duration_ok(text: str) -> bool:
    """Whether cli's parse_duration takes `text` (the fast path never calls the endpoint)."""
    if not text.isascii():
        return False
    for suffix in ("ms", "s", "m", "h"):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return True
    return text.replace(".", "", 1).isdigit()


def _parse(args: list[str]) -> tuple[dict[str, str], bool] | None:
    """`ask`'s options as click would take them, or None for anything else (-h, unknown, twice)."""
    if args[:1] != ["ask"]:
        return None
    parsed = _read_options(args[1:])
    if parsed is None or not _answerable(parsed[0]):
        return None
    return parsed


def _read_options(args: list[str]) -> tuple[dict[str, str], bool] | None:
    """(options, --json): each known option at most once, as `--name value` or `--name=value`,
    never with a value that starts with "-"; None for anything else."""
    got: dict[str, str] = {}
    as_json = False
    rest = iter(args)
    for arg in rest:
        if arg == "--json":
            as_json = True
            continue
        name, eq, value = arg.partition("=")
        if name not in _OPTIONS or name in got:
            return None
        if not eq:
            nxt = next(rest, None)
            if nxt is None:
                return None
            value = nxt
        if value.startswith("-"):
            return None
        got[name] = value
    return got, as_json


def _answerable(got: dict[str, str]) -> bool:
    """Whether the memo may answer these options: the three required ones given, a mode that
    reads the cache, a timeout cli would take."""
    if not {"--endpoint", "--prompt-file", "--out-file"} <= got.keys():
        return False
    return got.get("--mode", "replay") in ("replay", "offline") and _duration_ok(got.get("--timeout", "120s"))


def _config_key(workdir: str, gitdir: str) -> dict[str, str | None] | None:
    """What decides config.toml's rules: its bytes' digest, or, when the work tree has no such
    file, the index's identity (a sparse checkout reads it from there)."""
    try:
        with open(os.path.join(workdir, CONFIG), "rb") as fh:
            return {"config": hashlib.sha256(fh.read()).hexdigest()}
    except FileNotFoundError:
        index = file_stamp(os.path.join(gitdir, "index"))
        return None if index is None else {"config": None, "index": index}


def _rules(workdir: str, gitdir: str) -> list[tuple[str, str]] | None:
    """config.toml's normalize rules as the slow path last read them, if they still hold."""
    try:
        with open(replay_served_path(gitdir, "config"), "rb") as fh:
            memo = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    key = _config_key(workdir, gitdir)
    if key is None or not isinstance(memo, dict) or memo.get("key") != key or not isinstance(memo.get("rules"), list):
        return None
    return [(str(p), str(r)) for p, r in memo["rules"]]


def _plan(args: list[str]) -> tuple[str, str, str, bool, str, str] | None:
    """(out file, answer, fingerprint, --json, git dir, out file as given) for a hit; else None."""
    parsed = _parse(args)
    if parsed is None:
        return None
    opts, as_json = parsed
    try:
        ep: tuple[str, str, str] | None = parse_endpoint(opts["--endpoint"], opts.get("--model"))
    except BadInput:
        ep = None
    prompt_file, out_file = opts["--prompt-file"], opts["--out-file"]
    if ep is None or not _paths_taken(prompt_file, out_file):
        return None
    repo = _repo_state()
    if repo is None:
        return None
    gitdir, st, rules = repo
    from git_genjob.replay.prompt import normalize_text

    with open(prompt_file, encoding="utf-8") as fh:
        prompt = normalize_text(fh.read(), rules)[0]
    fp = fingerprint(ask_request(ep[0], ep[1], ep[2], prompt, opts.get("--key")))
    answer = _served_answer(gitdir, fp, st)
    if answer is None:
        return None
    return out_file, answer.decode("utf-8"), fp, as_json, gitdir, out_file


def _paths_taken(prompt_file: str, out_file: str) -> bool:
    """Whether click's Path options would take both files (stdin is the slow path's), as this
    path reads them: a prompt file, an out file that is no directory and, if it exists, readable."""
    if prompt_file == "-" or os.path.isdir(prompt_file) or os.path.isdir(out_file):
        return False
    return not (os.path.lexists(out_file) and not os.access(out_file, os.R_OK))  # click's Path refuses it


def _repo_state() -> tuple[str, dict[str, str], list[tuple[str, str]]] | None:
    """(git dir, stamp, normalize rules) of the repository here, when all three read cheaply."""
    dirs = repo_dirs()
    if dirs is None:
        return None
    workdir, gitdir = dirs
    st = stamp(gitdir)
    if st is None:
        return None
    rules = _rules(workdir, gitdir)
    if rules is None:
        return None
    return gitdir, st, rules


def _served_answer(gitdir: str, fp: str, st: dict[str, str]) -> bytes | None:
    """The answer the slow path served for `fp`, while its stamp, time window and digest hold."""
    try:
        with open(replay_served_path(gitdir, fp), "rb") as fh:
            data = fh.read(ANSWER_MAX + 4096)
    except FileNotFoundError:
        return None
    head, sep, answer = data.partition(b"\n")
    meta = json.loads(head)
    if not sep or not isinstance(meta, dict) or meta.get("stamp") != st:
        return None
    if not _now_within(meta):
        return None
    if hashlib.sha256(answer).hexdigest() != meta.get("answer"):
        return None
    return answer


def _now_within(meta: dict[str, object]) -> bool:
    """Whether the clock lies in the memo's window (no window: always)."""
    if meta.get("until") is None and meta.get("since") is None:
        return True
    import time

    return within(meta, time.time())


def try_ask(args: list[str]) -> int | None:
    """Serve `git genjob ask ...` from the served-answers memo: its exit code, or None when the
    slow path must run (a miss, a stale memo, anything this path does not decide)."""
    try:
        plan = _plan(args)
    except Exception:  # noqa: BLE001 - anything unexpected is the slow path's to decide and report
        return None
    if plan is None:
        return None
    out_file, answer, fp, as_json, gitdir, given = plan
    text = _reply(fp, given) if as_json else f"replay {fp}"
    if text is None:
        return None
    try:
        write_atomic(out_file, answer)
        log_hit(gitdir, fp, fp)  # the request's hash is its fingerprint
    except OSError:
        return None  # the slow path writes both again, or says why it cannot
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 0


def _reply(fp: str, out_file: str) -> str | None:
    """`ask --json`'s document for a replay hit, or None when the slow path must print it."""
    doc = {"fingerprint": fp, "source": "replay", "out_file": out_file}
    text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)
    if not text.isascii() or "\x7f" in text:
        return None  # documents/display.py's terminal_json would rewrite it
    return text


# -- written by the slow path ---------------------------------------------------------------
def before(workdir: str | None, gitdir: str) -> Taken | None:
    """The stamp to take before a slow-path ask reads anything, when this path can serve that
    repository at all (the same directories `try_ask` would find from here)."""
    try:
        dirs = repo_dirs()
    except OSError:
        return None
    if dirs is None or workdir is None:
        return None
    if os.path.realpath(dirs[0]) != os.path.realpath(workdir) or os.path.realpath(dirs[1]) != os.path.realpath(gitdir):
        return None
    st = stamp(dirs[1])
    return None if st is None else (dirs[0], dirs[1], st, _config_key(dirs[0], dirs[1]))


def remember(
    taken: Taken,
    config: bytes | None,
    rules: list[tuple[str, str]],
    fp: str,
    answer: str,
    span: dict[str, float | None],
) -> None:
    """After the slow path served `answer` for `fp`: keep it for `try_ask`, unless anything it
    read moved while it decided (then the next hit decides again)."""
    workdir, gitdir, st, key = taken
    data = answer.encode("utf-8")
    if len(data) > ANSWER_MAX or stamp(gitdir) != st or key is None or _config_key(workdir, gitdir) != key:
        return
    if key["config"] != (hashlib.sha256(config).hexdigest() if config is not None else None):
        return  # the slow path read another config.toml than the one stamped
    write_derived(replay_served_path(gitdir, "config"), json.dumps({"key": key, "rules": rules}).encode())
    meta = {"stamp": st, **span, "answer": hashlib.sha256(data).hexdigest()}
    write_derived(replay_served_path(gitdir, fp), json.dumps(meta, sort_keys=True).encode() + b"\n" + data)
