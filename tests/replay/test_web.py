"""Issue 21: `--timeout` is a deadline for the whole model call, and an answer is bounded.

Real servers on 127.0.0.1: one drips its body a byte at a time (each read alone would beat a
socket timeout), one drips its headers, one streams a chunked body that never ends. Each stops
by itself.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from git_genjob.documents.errors import GeneratorUnavailable
from git_genjob.replay.web import post_json
from tests.helpers.common import run_genjob, run_genjob_process, setup_worker, submit_key


class Hostile:
    """A raw HTTP server with one bad habit; it stops by itself after `life` seconds."""

    def __init__(self, mode: str, life: float = 20) -> None:
        self.mode, self.life = mode, life
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        end = time.monotonic() + self.life
        while not self.stop.is_set() and time.monotonic() < end:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.requests += 1
            threading.Thread(target=self._answer, args=(conn, end), daemon=True).start()

    def _answer(self, conn: socket.socket, end: float) -> None:
        try:
            conn.settimeout(5)
            conn.recv(1 << 20)
            if self.mode == "drip-body":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
                while time.monotonic() < end and not self.stop.is_set():
                    conn.sendall(b"x")
                    time.sleep(0.3)
            elif self.mode == "drip-headers":
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 200:
                    if time.monotonic() > end or self.stop.is_set():
                        break
                    conn.sendall(bytes([byte]))
                    time.sleep(0.3)
            else:  # endless: 1 MiB chunks for as long as the client reads
                conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                chunk = b"100000\r\n" + b"x" * 0x100000 + b"\r\n"
                while time.monotonic() < end and not self.stop.is_set():
                    conn.sendall(chunk)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture(params=["drip-body", "drip-headers", "endless"])
def hostile(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    server = Hostile(str(request.param))
    yield server
    server.close()


def test_the_timeout_bounds_the_whole_call(hostile: Hostile) -> None:
    start = time.monotonic()
    with pytest.raises(GeneratorUnavailable) as caught:
        post_json(f"{hostile.url}/model", {"prompt": "x"}, 1.5)
    elapsed = time.monotonic() - start
    assert caught.value.sent is True
    if hostile.mode == "endless":
        assert "longer than" in caught.value.message and "nothing was recorded" in caught.value.message
    else:
        assert "timed out after 1.5s" in caught.value.message
    assert elapsed < 3.5, elapsed


def test_a_worker_ends_at_its_timeout_with_no_renewal_after_it(repo: Path, hostile: Hostile) -> None:
    """Exit 3 within the timeout; renewals only while the call could still answer; no cache entry."""
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "x", "src/user.py")
    start = time.monotonic()
    res = run_genjob_process(
        "work", "--generator", f"http:{hostile.url}/model", "--signing-key", str(key), "--once", "--json",
        "--timeout", "2s", "--lease", "0.9s", cwd=repo, timeout=60,
    )  # fmt: skip
    elapsed = time.monotonic() - start
    assert res.code == 3, res.err
    assert json.loads(res.out)["jobs"][0]["result"] == "unknown"
    assert elapsed < 8, elapsed  # on main: the life of the server (20 s), renewing all along
    events = [e["event"] for e in json.loads(run_genjob("show", k, "--json", cwd=repo).out)["events"]]
    assert events.count("renewed") <= 2 / 0.3 + 1, events  # one every lease/3 s, none past the deadline
    assert json.loads(run_genjob("cache", "ls", "--json", cwd=repo).out) == []  # nothing recorded
