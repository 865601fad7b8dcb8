"""A worker SIGKILLed at each step of a recorded call (SPEC §12.1): before and after each of its
fsyncs, fdatasyncs and renames, the call is `ok` or `unknown`, never lost, and the job's retry
replays, byte for byte, every answer the agent got whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from git_genjob.storage.store import Store
from git_genjob.worker.gateway.journal import journal_calls
from tests.worker.test_gateway_concurrency import KEY, Tagged, _open, post

# The worker: its gateway up, then SIGKILLed at the k-th durable step ("before" or "after" it).
WORKER = """
import json, os, signal, sys, threading
from git_genjob.storage.store import Store
from git_genjob.worker.gateway.calls import Session
from git_genjob.worker.gateway.dialects import parse_gateway
from git_genjob.worker.gateway.server import Gateway
repo, url, when, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
count, lock = [0], threading.Lock()
def hooked(real):
    def step(*args):
        with lock:  # the sync pool's threads step too
            count[0] += 1
            mine = count[0]
        if mine == k and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        out = real(*args)
        if mine == k and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    return step
gw = Gateway([parse_gateway(f"openai={url}")], Session(Store.open(repo), "job-1", 1, False, None))
port = gw.listen_tcp()
os.fsync, os.fdatasync, os.replace = hooked(os.fsync), hooked(os.fdatasync), hooked(os.replace)
print(json.dumps(gw.env(f"http://127.0.0.1:{port}")), flush=True)
sys.stdin.readline()
gw.close()
"""
CALLS = [{"model": "m", "messages": [{"role": "user", "content": f"call {i}"}]} for i in (1, 2)]


def _calls(env: dict[str, str]) -> list[tuple[int | None, bytes]]:
    out: list[tuple[int | None, bytes]] = []
    for doc in CALLS:
        try:
            out.append(post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], doc))
        except OSError:  # the worker died mid-call
            out.append((None, b""))
    return out


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("k", range(1, 8))  # call 1's steps: journal opened, its rows, request, answer
def test_a_worker_killed_at_any_step_loses_no_answer_the_agent_got(
    repo: Path, monkeypatch: pytest.MonkeyPatch, when: str, k: int
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    up = Tagged()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    args = [sys.executable, "-c", WORKER, str(repo), up.url, when, str(k)]
    worker = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert worker.stdout is not None and worker.stdin is not None
    got = _calls(json.loads(worker.stdout.readline()))
    try:  # the worker, if it lives, closes its gateway
        worker.stdin.write("\n")
        worker.stdin.close()
    except OSError:
        pass
    assert worker.wait(60) == -9  # killed at step k
    worker.stdout.close()
    store = Store.open(str(repo))
    assert {c["status"] for c in journal_calls(store, "job-1")[0]} <= {"ok", "unknown"}
    gw, env2 = _open(store, "job-1", 2, up.url)
    assert not os.path.exists(gw.session._early_path(1, 1))  # a killed worker's early request: gone
    again = _calls(env2)
    gw.close()
    up.close()
    calls = gw.session.model_record()["calls"]
    for i, (status, body) in enumerate(got):
        if status != 200:
            break  # from the first call the agent did not get on, the retry may send afresh
        assert calls[i]["replayed"] and again[i] == (status, body)
