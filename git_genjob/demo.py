"""`git genjob demo`: a full round trip in a temporary repository, nothing to configure."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

USER_PY = '''\
"""A tiny user service."""

import json
import urllib.request


def fetch_user(uid):
    """Fetch one user record."""
    with urllib.request.urlopen(f"https://users.example/{uid}") as resp:
        return json.load(resp)
'''

INSTRUCTION = "Add a timeout to fetch_user and keep the public signature.\n\nAdd a test that checks it."


@dataclass
class DemoResult:
    path: str
    key: str
    commit: str
    log: str
    verify: list[str] = field(default_factory=list)


def _git(repo: str, *args: str) -> str:
    from git_genjob.remote import clean_env

    env = clean_env()
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    proc = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, env=env, check=True)
    return proc.stdout


def run_demo(keep: bool, model: str | None, say: Callable[[str], None]) -> DemoResult:
    from git_genjob.apply import apply
    from git_genjob.initrepo import init
    from git_genjob.keys import generate, trust_line, write_key_files
    from git_genjob.queue import submit
    from git_genjob.store import Store
    from git_genjob.verify import CHECKS, verify
    from git_genjob.worker import WorkerOptions, work

    base = tempfile.mkdtemp(prefix="genjob-demo-")
    repo = os.path.join(base, "repo")
    os.makedirs(os.path.join(repo, "src"))
    os.makedirs(os.path.join(repo, "tests"))
    with open(os.path.join(repo, "src", "user.py"), "w") as fh:
        fh.write(USER_PY)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "Demo Reviewer")
    _git(repo, "config", "user.email", "reviewer@demo.invalid")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "A tiny user service")
    say(f"$ cd {repo}")
    saved = {
        k: os.environ.get(k)
        for k in ("GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL")
    }
    os.environ.update(
        GIT_COMMITTER_NAME="Demo Reviewer",
        GIT_COMMITTER_EMAIL="reviewer@demo.invalid",
        GIT_AUTHOR_NAME="Demo Reviewer",
        GIT_AUTHOR_EMAIL="reviewer@demo.invalid",
    )
    try:
        store = Store.open(repo)
        init(store)
        say("$ git genjob init                  # .genjob/ trust store and config, notes display")
        key = generate("demo-worker")
        key_path = os.path.join(base, "keys", "demo-worker")
        write_key_files(key, key_path)
        say(f"$ git genjob keygen --name demo-worker --out {key_path}")
        with open(os.path.join(repo, ".genjob", "allowed_signers"), "a") as fh:
            fh.write(trust_line("demo-worker", key.public, None) + "\n")
        _git(repo, "add", ".genjob")
        _git(repo, "commit", "-q", "-m", "Trust the demo worker")
        say("$ git genjob trust add demo-worker keys/demo-worker.pub && git commit -m 'Trust the demo worker'")
        job = submit(store, INSTRUCTION, ["src/user.py"], ["tests/test_timeout.py"])
        say(f"$ git genjob submit -m '{INSTRUCTION.splitlines()[0]}' src/user.py --create tests/test_timeout.py")
        say(f"  created {job.key} {job.digest}")
        from git_genjob.generators import parse_spec

        spec = f"openai:{model}" if model else f"exec:{shlex.quote(sys.executable)} -m git_genjob.demo_agent"
        opts = WorkerOptions(parse_spec(spec, 600), key, "demo-worker", lease_s=120, max_jobs=1, timeout_s=600)
        say(f"$ git genjob work --generator '{spec}' --signing-key {key_path} --once")
        report = work(store, opts)
        for o in report.outcomes:
            say(f"  {o.key} {o.result}{': ' + o.reason if o.reason else ''}")
        if not report.outcomes or report.outcomes[0].result != "ok":
            from git_genjob.errors import Refused

            raise Refused("the demo worker did not produce an ok receipt", f"inspect the repository: {repo}")
        verdict = verify(store, job.key)
        say(f"$ git genjob verify {job.key}")
        lines = [f"  {'ok  ' if c.ok else 'FAIL'} {c.n} {CHECKS[c.n]:<9} {c.detail}" for c in verdict.checks]
        for line in lines:
            say(line)
        applied = apply(store, job.key)
        say(f"$ git genjob apply {job.key}")
        say(f"  applied as {applied.commit[:12]} on {applied.branch}")
        log = _git(repo, "-c", "notes.displayRef=refs/notes/genjob", "log", "--notes=genjob", "--stat", "-1")
        say("$ git log --notes=genjob --stat -1")
        say(log.rstrip())
        return DemoResult(repo, job.key, applied.commit, log, lines)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if not keep:
            import shutil

            shutil.rmtree(base, ignore_errors=True)
