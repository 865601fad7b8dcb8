"""`git genjob demo`: a full round trip in a temporary repository, nothing to configure."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from git_genjob.cli.demo_model import DemoModel
from git_genjob.documents.errors import GenjobError
from git_genjob.storage.gitdir import clean_env
from git_genjob.storage.layout import NOTES_REF

DEMO_KEY_ENV = "GENJOB_DEMO_MODEL_KEY"

if TYPE_CHECKING:
    from git_genjob.documents.keys import SigningKey
    from git_genjob.storage.store import Store
    from git_genjob.worker.generators.base import Generator
    from git_genjob.worker.run import WorkerOptions, WorkReport

USER_PY = '''\
"""A tiny user service."""

import json
import urllib.request


def fetch_user(uid):
    """Fetch one user record."""
    with urllib.request.urlopen(f"https://users.example/{uid}") as resp:
        return json.load(resp)
'''

MODEL_TASK = "Add a timeout parameter to fetch_user (default 10 seconds) and pass it to urlopen."
INSTRUCTION = "Add a timeout to fetch_user and keep the public signature.\n\nAdd a test that checks it."


@dataclass
class DemoResult:
    path: str
    key: str
    commit: str
    log: str
    verify: list[str] = field(default_factory=list)


def _git(repo: str, *args: str) -> str:
    env = clean_env()
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    proc = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, env=env, check=True)
    return proc.stdout


IDENTITY = {
    "GIT_COMMITTER_NAME": "Demo Reviewer",
    "GIT_COMMITTER_EMAIL": "reviewer@demo.invalid",
    "GIT_AUTHOR_NAME": "Demo Reviewer",
    "GIT_AUTHOR_EMAIL": "reviewer@demo.invalid",
}


@contextlib.contextmanager
def _demo_identity() -> Iterator[None]:
    """The demo's own git identity, without touching the caller's config."""
    saved = {k: os.environ.get(k) for k in IDENTITY}
    os.environ.update(IDENTITY)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _make_repo(base: str) -> str:
    repo = os.path.join(base, "repo")
    os.makedirs(os.path.join(repo, "src"))
    os.makedirs(os.path.join(repo, "tests"))
    with open(os.path.join(repo, "src", "user.py"), "w") as fh:
        fh.write(USER_PY)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", IDENTITY["GIT_AUTHOR_NAME"])
    _git(repo, "config", "user.email", IDENTITY["GIT_AUTHOR_EMAIL"])
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "A tiny user service")
    return repo


def _trusted_key(store: Store, base: str, say: Callable[[str], None]) -> tuple[SigningKey, str, SigningKey]:
    """(worker key, its path, planner key): both made in the demo's folder, never the user's."""
    from git_genjob.documents.keys import generate, write_key_files
    from git_genjob.planner.initrepo import init
    from git_genjob.planner.trust import add

    init(store, planner=False)
    planner = generate("demo-planner")
    planner_path = os.path.join(base, "keys", "demo-planner")
    write_key_files(planner, planner_path)
    add(store, "demo-planner", planner_path + ".pub", None, None, ("planner",))
    say("$ git genjob init                  # .genjob/ trust store and config, notes display, your planner key")
    key = generate("demo-worker")
    key_path = os.path.join(base, "keys", "demo-worker")
    write_key_files(key, key_path)
    say(f"$ git genjob keygen --name demo-worker --out {shlex.quote(key_path)}")
    add(store, "demo-worker", key_path + ".pub", None, None)
    _git(store.workdir or "", "add", ".genjob")
    _git(store.workdir or "", "commit", "-q", "-m", "Trust the demo worker")
    say(
        f"$ git genjob trust add demo-worker {shlex.quote(key_path + '.pub')} && git add .genjob"
        " && git commit -q -m 'Trust the demo worker'"
    )
    return key, key_path, planner


def _run_worker(store: Store, key: SigningKey, key_path: str, model: str | None, say: Callable[[str], None]) -> None:
    from git_genjob.cli import demo_agent
    from git_genjob.documents.errors import Refused
    from git_genjob.worker.run import WorkerOptions

    agent = f"{shlex.quote(sys.executable)} {shlex.quote(os.path.abspath(demo_agent.__file__))}"
    spec = f"openai:{model}" if model else f"exec:{agent}"
    generator, flag = _demo_generator(spec, say)
    gateway = DemoModel() if model is None else None  # the agent's model calls go through the gateway
    upstreams = _gateway_upstreams(gateway, say)
    opts = WorkerOptions(generator, key, "demo-worker", lease_s=120, max_jobs=1, timeout_s=600, gateways=upstreams)
    say(
        f"$ git genjob work --generator {shlex.quote(spec)} --signing-key {shlex.quote(key_path)}"
        f" --worker-id demo-worker --once{flag}"
    )
    report = _work_with_model_key(store, opts, gateway)
    for o in report.outcomes:
        say(f"  {o.key} {o.result}{': ' + o.reason if o.reason else ''}")
        usage = _usage(store, o.key)
        if usage:
            say(f"  model: {usage}")
    if not report.outcomes or report.outcomes[0].result != "ok":
        raise Refused("the demo worker did not produce an ok receipt", f"inspect the repository: {store.workdir}")


def _demo_generator(spec: str, say: Callable[[str], None]) -> tuple[Generator, str]:
    """(the generator, the flag its command line shows): sandboxed where this machine can."""
    from git_genjob.documents.errors import BadInput
    from git_genjob.worker.generators import parse_spec
    from git_genjob.worker.generators.sandbox.options import SandboxOptions

    try:
        return parse_spec(spec, 600), ""
    except BadInput as exc:  # no sandbox here: the demo's own agent runs unconfined, and says so
        say(f"  ({exc.message}; the demo's own agent runs with --no-sandbox)")
        return parse_spec(spec, 600, SandboxOptions(mechanism="none")), " --no-sandbox"


def _gateway_upstreams(gateway: DemoModel | None, say: Callable[[str], None]) -> tuple[object, ...]:
    """The worker's gateway upstream to the demo's model, if it runs."""
    if gateway is None:
        return ()
    from git_genjob.worker.gateway.dialects import parse_gateway

    upstreams = (parse_gateway(f"openai={gateway.url}", key_env=DEMO_KEY_ENV),)
    # Not printed as a --gateway flag: the transcript replays as commands, and a replayed
    # `--gateway openai=…` would hand the caller's own OPENAI_API_KEY to whatever then listens
    # on that port. Without a gateway the demo agent decides alone, to the same edit.
    say(
        f"  (this worker's gateway reaches the demo's model on {gateway.url}, holding its key in {DEMO_KEY_ENV}; "
        "for a real one: --gateway openai=https://api.openai.com)"
    )
    return upstreams


def _work_with_model_key(store: Store, opts: WorkerOptions, gateway: DemoModel | None) -> WorkReport:
    """One worker run with the demo model's key in the environment, restored (and the model
    stopped) after."""
    from git_genjob.worker.run import work

    saved = os.environ.get(DEMO_KEY_ENV)
    os.environ[DEMO_KEY_ENV] = "demo-model-key"  # the worker's own: its gateway adds it upstream
    try:
        return work(store, opts)
    finally:
        if gateway is not None:
            gateway.close()
        if saved is None:
            os.environ.pop(DEMO_KEY_ENV, None)
        else:
            os.environ[DEMO_KEY_ENV] = saved


def _verify(store: Store, key: str, say: Callable[[str], None]) -> list[str]:
    """`verify KEY` as the transcript shows it: one line per check."""
    from git_genjob.landing.verify import CHECKS, verify

    verdict = verify(store, key)
    say(f"$ git genjob verify {key}")
    lines = [f"  {'ok  ' if c.ok else 'FAIL'} {c.n} {CHECKS[c.n]:<9} {c.detail}" for c in verdict.checks]
    for line in lines:
        say(line)
    return lines


def _usage(store: Store, key: str) -> str | None:
    """The receipt's gateway totals, as `show` prints them."""
    from git_genjob.documents.display import usage_text
    from git_genjob.planner.queue import show

    totals = (show(store, key).get("ended") or {}).get("usage")
    return usage_text(totals) if isinstance(totals, dict) else None


def run_demo(keep: bool, model: str | None, say: Callable[[str], None]) -> DemoResult:
    """init, keygen, trust, submit, work, verify, apply, then the log a reviewer reads."""
    from git_genjob.landing.apply import apply
    from git_genjob.planner.queue import submit
    from git_genjob.storage.store import Store

    base = tempfile.mkdtemp(prefix="genjob-demo-")
    try:
        with _demo_identity():
            repo = _make_repo(base)
            say(f"$ cd {shlex.quote(repo)}")
            store = Store.open(repo)
            key, key_path, planner = _trusted_key(store, base, say)
            # A model gets a one-file job: every OpenAI-compatible server can answer it as text.
            instruction, creates = (INSTRUCTION, ["tests/test_timeout.py"]) if model is None else (MODEL_TASK, [])
            job = submit(store, instruction, ["src/user.py"], creates, signing_key=planner)
            created = "".join(f" --create {p}" for p in creates)
            messages = " ".join(f"-m {shlex.quote(p.strip())}" for p in instruction.split("\n\n"))
            say(f"$ git genjob submit {messages} src/user.py{created}")  # -m twice: two paragraphs
            say(f"  created {job.key} {job.digest}")
            _run_worker(store, key, key_path, model, say)
            lines = _verify(store, job.key, say)
            applied = apply(store, job.key)
            say(f"$ git genjob apply {job.key}")
            say(f"  applied as {applied.commit[:12]} on {applied.branch}")
            log = _git(repo, "-c", f"notes.displayRef={NOTES_REF}", "log", "--notes=genjob", "--stat", "-1")
            say("$ git log --notes=genjob --stat -1")
            say(log.rstrip())
            result = DemoResult(repo, job.key, applied.commit, log, lines)
    except GenjobError as exc:
        # A failed demo keeps its repository: the hint names it, so it must still be there.
        exc.hint = f"{exc.hint or 'inspect ' + base}; remove it after with: rm -rf {base}"
        raise
    if not keep:
        shutil.rmtree(base, ignore_errors=True)
    return result
