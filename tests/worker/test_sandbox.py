"""Issue 21: every exec generator runs in a process sandbox, and its receipt says so.

Each hostile generator below is one an agent could be talked into by an instruction from a
hostile remote. The tests run under every mechanism this machine has (bwrap and Landlock where
both work; GENJOB_SANDBOX picks one), and each one fails on a worker without the sandbox.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.common import git, run_genjob, running, setup_worker, submit_key, work
from tests.worker.test_generators import predicate


def _available() -> list[str]:
    from git_genjob.worker.generators.sandbox.choose import bwrap_problem, landlock_problem

    return [m for m, why in (("bwrap", bwrap_problem()), ("landlock", landlock_problem(False))) if why is None]


MECHANISMS = _available()


@pytest.fixture(params=["bwrap", "landlock"])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name = str(request.param)
    if name not in MECHANISMS:
        if os.environ.get("CI") and name == "landlock":
            raise AssertionError("CI's kernel must have Landlock")
        if os.environ.get("CI") and shutil.which("bwrap"):  # installed by .ci/run: unusable is a failure
            raise AssertionError("bwrap is installed but not usable here")
        pytest.skip(f"{name} is not usable here")
    monkeypatch.setenv("GENJOB_SANDBOX", name)
    return name


def _job(out: str) -> dict:  # type: ignore[type-arg]
    doc = json.loads(out)
    return doc["jobs"][0]  # type: ignore[no-any-return]


def test_a_hostile_generator_reads_no_key_no_ssh_no_repository(
    ready: tuple[Path, Path], mechanism: str, hermetic_seal: Path
) -> None:
    """The signing key by absolute path, ~/.ssh/*, .git/config, a tracked file outside the job."""
    repo, key = ready
    ssh = hermetic_seal / ".ssh"
    ssh.mkdir(exist_ok=True)
    (ssh / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot really\n")
    k = submit_key(repo, "-m", "x", "src/user.py")
    targets = [key, ssh / "id_ed25519", repo / ".git" / "config", repo / "README.md", repo / "tests" / "test_user.py"]
    probes = " ".join(shlex.quote(str(t)) for t in targets)
    command = (
        f'for f in {probes}; do if cat "$f" >/dev/null 2>&1; then echo "read $f" >&2; bad=1; fi; done; '
        "ls ~/.ssh >/dev/null 2>&1 && { echo 'listed ~/.ssh' >&2; bad=1; }; "
        '[ -z "$bad" ] && echo confined > src/user.py; exit ${bad:-0}'
    )
    res = work(repo, key, command, "--once")
    assert res.code == 0, res.err
    assert _job(res.out)["result"] == "ok", _job(res.out)["reason"]
    sandbox = predicate(repo, k)["sandbox"]
    assert sandbox["mechanism"] == mechanism and sandbox["network"] in ("none", "tcp-denied")
    assert str(key) not in sandbox["ro"] + sandbox["rw"]


def test_nothing_written_outside_the_scratch_tree_outlives_the_attempt(
    ready: tuple[Path, Path], mechanism: str, tmp_path: Path
) -> None:
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = f"/tmp/genjob-issue21-{os.getpid()}-{mechanism}"
    command = (
        f"echo x > {outside}/planted; echo x > {marker}; echo x > {repo}/planted; "
        'echo x > "$HOME/.bashrc"; echo x > "$TMPDIR/left"; echo y > src/user.py'
    )
    res = work(repo, key, command, "--once")
    assert res.code == 0, res.err
    assert _job(res.out)["result"] == "ok"
    assert not (outside / "planted").exists() and not os.path.exists(marker) and not (repo / "planted").exists()
    leftovers = [p for p in Path("/tmp").glob("genjob-scratch-*") if p.stat().st_uid == os.getuid()]
    assert not any((p / "home" / ".bashrc").exists() for p in leftovers)


def test_the_system_files_tools_read_are_readable_and_read_only(ready: tuple[Path, Path], mechanism: str) -> None:
    """The curated /etc: readable by the user the generator runs as (for a root worker bubblewrap
    once made /etc 0700, so `nobody` read no passwd, no ld.so.cache, no CA certificates), and
    not writable (in bubblewrap's view the files are copies in a tmpfs), and no descriptor the
    copies were made from reaches the generator."""
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    readable = [p for p in ("/etc/passwd", "/etc/ld.so.cache", "/etc/hosts") if os.path.isfile(p)]
    certs = "/etc/ssl/certs" if os.path.isdir("/etc/ssl/certs") and os.listdir("/etc/ssl/certs") else ""
    assert readable
    command = (
        f"for f in {' '.join(readable)}; do "
        'head -c1 "$f" >/dev/null || { echo "cannot read $f" >&2; exit 3; }; done; '
        f'[ -z "{certs}" ] || [ -n "$(ls {certs or "/nonexistent"})" ] || {{ echo "cannot list certs" >&2; exit 4; }}; '
        f"for f in {' '.join(readable)} /etc/planted; do "
        '{ echo x >> "$f"; } 2>/dev/null && { echo "wrote $f" >&2; exit 5; }; done; '
        # no descriptor of the worker's (bubblewrap's copies are made from descriptors) beyond
        # stdin, stdout, stderr and ls's own
        '[ "$(ls /proc/self/fd | wc -l)" -le 4 ] || { ls -l /proc/self/fd >&2; exit 6; }; '
        "echo ok > src/user.py"
    )
    before = {p: Path(p).read_bytes() for p in readable}
    res = work(repo, key, command, "--once")
    assert res.code == 0, res.err
    assert _job(res.out)["result"] == "ok", _job(res.out)["reason"]
    assert {p: Path(p).read_bytes() for p in readable} == before and not os.path.exists("/etc/planted")


class _Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts (stops by itself);
    with `http`, each gets a tiny HTTP answer."""

    def __init__(self, http: bool = False) -> None:
        self.http = http
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        end = time.monotonic() + 120
        while not self.stop.is_set() and time.monotonic() < end:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            if self.http:
                try:
                    conn.settimeout(5)
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                except OSError:
                    pass
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.mark.parametrize("allow_net", [False, True])
def test_network_is_off_unless_allow_net(ready: tuple[Path, Path], mechanism: str, allow_net: bool) -> None:
    repo, key = ready
    k = submit_key(repo, "-m", "x", "src/user.py")
    server = _Listener()
    try:
        probe = f"import socket; socket.create_connection(('127.0.0.1', {server.port}), timeout=3).close()"
        command = f'python3 -c "{probe}" && echo connected > src/user.py || echo refused > src/user.py'
        res = work(repo, key, command, "--once", *(["--allow-net"] if allow_net else []))
        assert res.code == 0, res.err
    finally:
        server.close()
    assert server.accepted == (1 if allow_net else 0)
    assert predicate(repo, k)["sandbox"]["network"] == (
        "all" if allow_net else predicate(repo, k)["sandbox"]["network"]
    )
    if not allow_net:
        assert predicate(repo, k)["sandbox"]["network"] in ("none", "tcp-denied")


ALLOW_HOST_PROBE = r"""
import socket, sys, urllib.request
a, b = int(sys.argv[1]), int(sys.argv[2])
out = []
for port in (a, b):
    try:
        urllib.request.urlopen("http://127.0.0.1:%d/x" % port, timeout=5).read()
        out.append("http %d ok" % port)
    except Exception as exc:
        out.append("http %d %s" % (port, exc))
try:
    socket.create_connection(("127.0.0.1", b), timeout=3).close()
    out.append("direct ok")
except OSError as exc:
    out.append("direct %s" % exc)
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n" % b)
out.append("connect " + s.recv(200).decode().split("\r\n")[0])
open("src/user.py", "w").write("\n".join(out) + "\n")
"""


def test_allow_host_reaches_the_listed_host_and_nothing_else(
    ready: tuple[Path, Path], mechanism: str, tmp_path: Path
) -> None:
    repo, key = ready
    k = submit_key(repo, "-m", "x", "src/user.py")
    probe = tmp_path / "probe.py"
    probe.write_text(ALLOW_HOST_PROBE)
    allowed, other = _Listener(http=True), _Listener(http=True)
    try:
        command = f"python3 {probe} {allowed.port} {other.port}"
        res = work(repo, key, command, "--once", "--allow-host", f"127.0.0.1:{allowed.port}")
        assert res.code == 0, res.err
        assert _job(res.out)["result"] == "ok", _job(res.out)
    finally:
        allowed.close()
        other.close()
    assert allowed.accepted == 1 and other.accepted == 0
    text = git(repo, "show", f"refs/genjob/jobs/{k}:outputs/src/user.py")
    assert f"http {allowed.port} ok" in text and "403" in text and "direct ok" not in text, text
    assert "connect HTTP/1.1 403 Forbidden" in text, text
    sandbox = predicate(repo, k)["sandbox"]
    assert sandbox["network"] == "hosts" and sandbox["hosts"] == [f"127.0.0.1:{allowed.port}"]


@pytest.mark.parametrize(
    "extra, error",
    [
        (["--allow-host", "a b"], "is not a host name"),
        (["--allow-host", "example.com:x"], "the port must be a number"),
        (["--allow-host", "example.com", "--allow-net"], "--allow-host and --allow-net"),
    ],
)
def test_allow_host_is_checked_before_a_claim(ready: tuple[Path, Path], extra: list[str], error: str) -> None:
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    res = work(repo, key, "true", "--once", *extra)
    assert res.code == 2 and error in res.err, res.err


def test_a_fork_bomb_costs_one_aborted_receipt(ready: tuple[Path, Path], mechanism: str) -> None:
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    command = "i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done; echo forked > src/user.py"
    started = time.monotonic()
    res = work(repo, key, command, "--once", "--sandbox-limit", "procs=20")
    assert res.code == 0, res.err
    job = _job(res.out)
    assert job["result"] == "aborted" and "fork" in job["reason"].lower(), job
    assert time.monotonic() - started < 30  # the sleeps went with the sandbox
    assert run_genjob("status", cwd=repo).code == 0  # the worker (this process) is fine


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [
        "sleep {m}1 & setsid sleep {m}2 & sleep {m}3",
        # the generator's first process itself leaves the worker's process group (the reaper's
        # target): what it started must still go with the worker
        "exec setsid sh -c 'sleep {m}1 & sleep {m}2 & sleep {m}3'",
    ],
)
def test_kill_9_of_the_worker_leaves_no_sandboxed_process(ready: tuple[Path, Path], mechanism: str, shape: str) -> None:
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    marker = f"31.{os.getpid()}{len(mechanism)}{len(shape) % 10}"
    command = shape.format(m=marker)
    env = {**os.environ, "GENJOB_SANDBOX": mechanism}
    proc = subprocess.Popen(
        [sys.executable, "-m", "git_genjob", "work", "--once", "--signing-key", str(key),
         "--generator", f"exec:{command}"],
        cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while len(running(marker)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    # The second shape may instead end at once: where the first process leads a session of its
    # own, setsid(1) forks, the first process exits and its PID namespace goes with it.
    assert len(running(marker)) == 3 or ("exec setsid" in shape and proc.poll() is not None)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(marker) == []


def test_no_sandbox_is_recorded_and_refused_under_require_sandbox(ready: tuple[Path, Path], mechanism: str) -> None:
    repo, key = ready
    unconfined = submit_key(repo, "-m", "a", "src/user.py")
    res = work(repo, key, "echo a > src/user.py", "--once", "--no-sandbox")
    assert _job(res.out)["result"] == "ok"
    assert predicate(repo, unconfined)["sandbox"] == {
        "mechanism": "none", "network": "all", "hosts": [], "ro": [], "rw": [], "limits": None,
    }  # fmt: skip
    confined = submit_key(repo, "-m", "b", "README.md")
    res = work(repo, key, "echo b > README.md", "--once")
    assert _job(res.out)["result"] == "ok"
    assert predicate(repo, confined)["sandbox"]["mechanism"] == mechanism
    assert run_genjob("verify", unconfined, cwd=repo).code == 0  # no policy yet
    config = repo / ".genjob" / "config.toml"
    config.write_text(config.read_text().replace("[policy]\n", "[policy]\nrequire_sandbox = true\n"))
    git(repo, "commit", "-qam", "require a sandbox")
    res = run_genjob("verify", unconfined, cwd=repo)
    assert res.code == 1 and "ran without a sandbox" in res.out and "require_sandbox" in res.out
    assert run_genjob("apply", unconfined, cwd=repo).code == 1
    res = run_genjob("verify", confined, cwd=repo)
    assert res.code == 0 and f"sandbox: {mechanism}" in res.out
    assert run_genjob("apply", confined, cwd=repo).code == 0
    assert run_genjob("audit", cwd=repo).code == 0


def test_a_receipt_from_before_the_field_verifies_and_counts_as_unconfined() -> None:
    from git_genjob.documents.receipt import Predicate, sandbox_problems

    doc = {
        "job_digest": "sha256:" + "0" * 64, "key": "k", "claim": "1" * 40, "status": "ok", "reason": "",
        "outputs": {}, "ignored": [], "worker_id": "w", "attempt": 1,
        "generator": {"kind": "exec", "endpoint": None, "model": None, "command": "true"},
        "replays": [], "started_at": "2026-01-01T00:00:00.000Z", "finished_at": "2026-01-01T00:00:00.000Z",
    }  # fmt: skip
    pred = Predicate.from_dict(doc)
    assert pred.sandbox is None and pred.to_dict() == doc
    assert sandbox_problems(pred, False) == []
    assert "records no sandbox" in sandbox_problems(pred, True)[0]


def test_no_mechanism_is_refused_before_any_claim(ready: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from git_genjob.worker.generators.sandbox import choose

    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    monkeypatch.setattr(choose, "bwrap_problem", lambda: "not installed")
    monkeypatch.setattr(choose, "landlock_problem", lambda *_: "not available")
    before = git(repo, "for-each-ref")
    res = work(repo, key, "true", "--once")
    assert res.code == 2
    assert "bubblewrap" in res.err and "Landlock" in res.err and "--no-sandbox" in res.err
    assert git(repo, "for-each-ref") == before
    res = work(repo, key, "echo y > src/user.py", "--once", "--no-sandbox")
    assert res.code == 0 and _job(res.out)["result"] == "ok"


def test_sandbox_paths_from_options_and_config(ready: tuple[Path, Path], mechanism: str, tmp_path: Path) -> None:
    repo, key = ready
    k = submit_key(repo, "-m", "x", "src/user.py")
    shared = tmp_path / "toolchain"
    shared.mkdir()
    (shared / "tool.txt").write_text("from the toolchain\n")
    out = tmp_path / "cache"
    out.mkdir(mode=0o777)
    out.chmod(0o777)  # a root worker's generator runs as nobody
    config = repo / ".genjob" / "config.toml"
    config.write_text(config.read_text().replace("[sandbox]\n", f'[sandbox]\nro = ["{shared}"]\nprocs = 64\n'))
    command = f"cat {shared}/tool.txt > src/user.py && echo kept > {out}/cache.txt && ! echo no > {shared}/new"
    res = work(repo, key, command, "--once", "--sandbox-rw", str(out), "--sandbox-limit", "memory=2G")
    assert res.code == 0, res.err
    assert _job(res.out)["result"] == "ok", _job(res.out)
    assert (out / "cache.txt").read_text() == "kept\n" and not (shared / "new").exists()
    sandbox = predicate(repo, k)["sandbox"]
    assert sandbox["ro"] == [str(shared)] and sandbox["rw"] == [str(out)]
    assert sandbox["limits"] == {"procs": 64, "memory": 2 << 30, "file_size": 1 << 30, "cpu": 3600}
    res = work(repo, key, "true", "--once", "--sandbox-ro", str(tmp_path / "missing"))
    assert res.code == 2 and "no such file" in res.err


def test_the_demo_runs_sandboxed(mechanism: str, tmp_path: Path) -> None:
    res = run_genjob("demo", "--json", cwd=tmp_path)
    assert res.code == 0, res.err


def test_an_escaped_child_racing_symlinks_and_fifos_never_gets_a_host_file_signed(
    ready: tuple[Path, Path], tmp_path: Path
) -> None:
    """Unconfined (--no-sandbox), a child that escaped with setsid swaps the output between a
    file, a symlink to a host file and a FIFO while the worker reads it back."""
    import hashlib

    from tests.helpers.common import run_genjob_process

    repo, key = ready
    secret = tmp_path / "host-secret.txt"
    secret.write_text("a host file the generator must never get signed\n")
    bad = "sha256:" + hashlib.sha256(secret.read_bytes()).hexdigest()
    racer = (
        "i=0; while [ $i -lt 300 ] && [ -d src ]; do rm -f src/user.py; "
        f"ln -s {secret} src/user.py 2>/dev/null; rm -f src/user.py; "
        "mkfifo src/user.py 2>/dev/null; rm -f src/user.py; echo fine > src/user.py 2>/dev/null; i=$((i+1)); done"
    )
    # The generator's own write goes through a rename: it never opens a FIFO the racer left.
    command = (
        f"setsid sh -c {shlex.quote(racer)} >/dev/null 2>&1 & sleep 0.02; echo fine > w.$$ && mv -f w.$$ src/user.py"
    )
    for _ in range(12):
        k = submit_key(repo, "-m", f"race {_}", "src/user.py")
        res = run_genjob_process(
            "work", "--once", "--json", "--no-sandbox", "--timeout", "20s", "--signing-key", str(key),
            "--generator", f"exec:{command}", cwd=repo, timeout=60,
        )  # fmt: skip
        assert res.code == 0, res.err
        outputs = predicate(repo, k)["outputs"]
        assert outputs.get("src/user.py") != bad
        run_genjob("drop", k, "--why", "race", cwd=repo)
    time.sleep(0.5)  # the racers end by themselves once their scratch tree is gone


def test_wait_ends_at_the_generators_exit_its_deadline_or_a_stop() -> None:
    """`_wait` (a pidfd where the kernel has one) says True for an exit and False for a deadline
    or a fencing stop. How soon it notices an exit is measured, not asserted: `bench/run --only
    exit` (0.5 ms against a blocking waitpid's 0.4 ms; 24 ms when polled)."""
    from git_genjob.worker.generators.base import GenContext
    from git_genjob.worker.generators.exec import _wait

    ctx = GenContext(None, "", "", "", {}, 10, threading.Event())  # type: ignore[arg-type]
    proc = subprocess.Popen(["true"])
    assert _wait(proc, time.monotonic() + 60, ctx) and proc.returncode == 0
    for stop in (False, True):
        proc = subprocess.Popen(["sleep", "60"])
        try:
            if stop:
                ctx.stop.set()
            assert not _wait(proc, time.monotonic() + (60 if stop else 0.2), ctx)
            assert proc.poll() is None  # still running: the caller kills it
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("launcher", ["thread", "forked child"])
def test_both_landlock_launches_confine_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launcher: str) -> None:
    """A root worker starts the generator from a confined thread of its own; a non-root one (or
    one on an architecture without known set*id numbers) from a confined forked child. Both
    give the same confinement: the forked one is forced here so that a root machine runs it."""
    import platform

    from git_genjob.documents.config import SandboxLimits
    from git_genjob.worker.generators.sandbox import landlock
    from git_genjob.worker.generators.sandbox.confine import confine
    from git_genjob.worker.generators.sandbox.identity import sandbox_user
    from git_genjob.worker.generators.sandbox.options import Attempt, SandboxOptions

    if "landlock" not in MECHANISMS:
        if os.environ.get("CI"):
            raise AssertionError("CI's kernel must have Landlock")
        pytest.skip("Landlock is not usable here")
    if launcher == "forked child":
        monkeypatch.setattr(landlock, "SETID_SYSCALLS", {})
    elif os.geteuid() != 0 or platform.machine() not in landlock.SETID_SYSCALLS:
        pytest.skip("the thread launch is a root worker's")
    secret = tmp_path / "secret"
    secret.write_text("the worker's key\n")
    attempt_dir = tmp_path / "attempt"
    for sub in ("work", "meta"):
        (attempt_dir / sub).mkdir(parents=True)
    files = [str(attempt_dir / "meta" / n) for n in ("job.json", "instruction.txt", "generator.log")]
    for f in files:
        Path(f).write_text("")
    attempt = Attempt(
        str(attempt_dir / "work"), files[:2], files[2], str(attempt_dir / "home"), str(attempt_dir / "tmp")
    )
    command = (
        f"cat {secret} && exit 3; [ $$ = 1 ] || exit 4; id -u > uid; "
        "grep 'Max processes' /proc/self/limits > limits; grep NoNewPrivs /proc/self/status > nnp"
    )
    opts = SandboxOptions(limits=SandboxLimits(procs=40))
    launch = confine("landlock", opts, command, attempt, os.environ.get("PATH", os.defpath))
    assert (launch.spawner is not None) == (launcher == "thread")
    with open(files[2], "wb") as log:
        proc = launch.start(
            lambda: subprocess.Popen(
                launch.argv,
                cwd=attempt.scratch,
                env={**os.environ, **launch.env, "HOME": attempt.home},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=launch.fds,
                preexec_fn=launch.preexec,
            )
        )
    launch.close()
    assert proc.wait(timeout=30) == 0, Path(files[2]).read_text()
    work_dir = attempt_dir / "work"
    assert (work_dir / "uid").read_text().strip() == str((sandbox_user() or (os.getuid(), 0))[0])
    assert (work_dir / "limits").read_text().split()[2] != "unlimited"
    assert (work_dir / "nnp").read_text().split() == ["NoNewPrivs:", "1"]
    assert os.getuid() == os.geteuid() and Path("/proc/self/status").read_text().count("NoNewPrivs:\t0") == 1


@pytest.mark.parametrize(
    "text, error",
    [
        ("[sandbox]\nro = '/x'\n", "sandbox.ro must be a list of strings"),
        ("[sandbox]\nallow_net = 1\n", "sandbox.allow_net must be true or false"),
        ("[sandbox]\nmemory = 'lots'\n", "sandbox.memory must be a positive size"),
        ("[sandbox]\nprocs = 0\n", "sandbox.procs must be a positive integer"),
        ("[sandbox]\nmechanism = 'none'\n", "sandbox.mechanism must be one of"),
        ("[sandbox]\nnetwork = 'off'\n", "[sandbox] has no setting 'network'"),
        ("[policy]\nrequire_sandbox = 'yes'\n", "policy.require_sandbox must be true or false"),
    ],
)
def test_sandbox_settings_are_checked(text: str, error: str) -> None:
    from git_genjob.documents.config import parse_config
    from git_genjob.documents.errors import BadInput

    with pytest.raises(BadInput) as caught:
        parse_config(text.encode())
    assert error in caught.value.message


def test_sandbox_settings_parse() -> None:
    from git_genjob.documents.config import parse_config

    cfg = parse_config(b'[sandbox]\nro = ["/opt/x"]\nmemory = "512M"\ncpu = 60\n[policy]\nrequire_sandbox = true\n')
    assert cfg.sandbox.ro == ("/opt/x",) and cfg.sandbox.limits.memory == 512 << 20 and cfg.sandbox.limits.cpu == 60
    assert cfg.require_sandbox is True
    assert parse_config(None).require_sandbox is False


def test_bad_sandbox_options_are_refused_before_a_claim(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    before = git(repo, "for-each-ref")
    for extra, error in (
        (["--sandbox-limit", "threads=3"], "NAME one of procs, memory, file_size, cpu"),
        (["--sandbox-limit", "memory=x"], "memory must be a positive size"),
        (["--sandbox-rw", "/"], "the whole file system"),
    ):
        res = work(repo, key, "true", "--once", *extra)
        assert res.code == 2 and error in res.err, res.err
    assert git(repo, "for-each-ref") == before


def test_the_command_line_shows_the_program_and_its_script_never_other_arguments(tmp_path: Path) -> None:
    from git_genjob.worker.generators.sandbox.paths import program_paths

    script = tmp_path / "gen.py"
    script.write_text("print(1)\n")
    secret = tmp_path / "id_ed25519"
    secret.write_text("x\n")
    path = os.environ["PATH"]
    assert program_paths(f"python3 -u {script}", path) == [str(script)]
    assert program_paths(f"cat {secret}", path) == []
    assert program_paths(f"python3 -c 'open(\"{secret}\")'", path) == []
    shown = program_paths(f"{sys.executable} {script}; cat {secret}", path)
    assert str(script) in shown and str(secret) not in shown


def test_audit_reports_an_unconfined_receipt_on_a_branch_that_requires_a_sandbox(ready: tuple[Path, Path]) -> None:
    """An unconfined receipt applied before the policy, then carried (cherry-pick and its note)
    onto a branch whose committed config requires a sandbox: audit names it under check 4."""
    repo, key = ready
    k = submit_key(repo, "-m", "a", "src/user.py")
    assert _job(work(repo, key, "echo a > src/user.py", "--once", "--no-sandbox").out)["result"] == "ok"
    assert run_genjob("apply", k, cwd=repo).code == 0
    applied = git(repo, "rev-parse", "HEAD").strip()
    assert run_genjob("audit", cwd=repo).code == 0  # no policy on main
    git(repo, "checkout", "-q", "-b", "strict", f"{applied}~1")
    config = repo / ".genjob" / "config.toml"
    config.write_text(config.read_text().replace("[policy]\n", "[policy]\nrequire_sandbox = true\n"))
    git(repo, "commit", "-qam", "require a sandbox")
    git(repo, "cherry-pick", applied)
    for ref in ("genjob", "genjob-receipts"):  # the summary and the envelope (SPEC §11)
        git(repo, "notes", f"--ref={ref}", "copy", applied, "HEAD")
    res = run_genjob("audit", "HEAD~1..HEAD", cwd=repo)
    assert res.code == 1 and "check 4:" in res.out and "require_sandbox" in res.out, res.out


# -- found by the red-team pass of the sandbox, 2026-12-05 ------------------------------------------


def test_no_worker_secret_reaches_the_generator_through_its_environment(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    """The GitLab workers' job holds its push token and the worker key in GENJOB_* variables
    (ci-gitlab.yml); the generator gets only what docs/generators.md names, and --pass-env."""
    from tests.helpers.common import shared_dir

    key = setup_worker(repo)
    out = shared_dir(tmp_path)
    monkeypatch.setenv("GENJOB_WORKER_KEY", key.read_text())
    monkeypatch.setenv("GENJOB_REMOTE_TOKEN", "glpat-push-token-s3cr3t")
    monkeypatch.setenv("GENJOB_LAND_TOKEN", "glpat-land-token-s3cr3t")
    monkeypatch.setenv("GENJOB_SHOWN", "asked-for")
    submit_key(repo, "-m", "x", "src/user.py")
    res = work(repo, key, f"env > {out}/env; echo x > src/user.py", "--once", "--sandbox-rw", str(out),
               "--pass-env", "GENJOB_SHOWN")  # fmt: skip
    assert res.code == 0, res.err
    seen = (out / "env").read_text()
    assert "s3cr3t" not in seen and "PRIVATE KEY" not in seen
    assert key.read_text().strip().splitlines()[1] not in seen
    assert "GENJOB_SHOWN=asked-for" in seen and "GENJOB_KEY=" in seen  # what is documented still comes


def test_a_root_worker_never_falls_back_to_landlock_unasked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Under Landlock a root worker's generator (nobody with CAP_DAC_OVERRIDE) could connect to
    root's named Unix sockets; without bubblewrap, `auto` refuses and names the way to choose it."""
    from git_genjob.documents.errors import BadInput
    from git_genjob.worker.generators.sandbox.choose import bwrap_problem, choose
    from git_genjob.worker.generators.sandbox.options import SandboxOptions

    if os.environ.get("CI") and "landlock" not in MECHANISMS:
        raise AssertionError("CI's kernel must have Landlock")
    if os.geteuid() != 0 or "landlock" not in MECHANISMS:
        pytest.skip("needs a root worker where Landlock works")  # the rule is a root worker's
    empty = tmp_path / "bin"
    empty.mkdir()
    for tool in ("sh", "setpriv", "prlimit", "unshare"):
        if shutil.which(tool):
            (empty / tool).symlink_to(shutil.which(tool))  # everything but bwrap
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("GENJOB_SANDBOX", raising=False)
    bwrap_problem.cache_clear()
    try:
        with pytest.raises(BadInput) as refused:
            choose(SandboxOptions())
        assert "Unix sockets" in refused.value.message and "GENJOB_SANDBOX=landlock" in (refused.value.hint or "")
        monkeypatch.setenv("GENJOB_SANDBOX", "landlock")
        assert choose(SandboxOptions()) == "landlock"  # chosen by name, it runs
    finally:
        bwrap_problem.cache_clear()


def test_a_venv_that_holds_the_repository_or_the_key_is_refused_before_any_claim(
    repo: Path, tmp_path: Path, mechanism: str
) -> None:
    """A program in a venv made beside the repository: its prefix (shown read-only) holds the
    repository and the worker key; the worker refuses before a claim instead of showing them."""
    from tests.helpers.common import refs, shared_dir

    key = setup_worker(repo)  # repo.parent / "keys" / "w1"
    out = shared_dir(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(repo.parent)], check=True)
    submit_key(repo, "-m", "x", "src/user.py")
    before = refs(repo)
    code = f"import shutil; shutil.copy({str(key)!r}, {str(out)!r} + '/key'); open('src/user.py', 'w').write('x')"
    res = work(repo, key, f"{repo.parent}/bin/python3 -c {shlex.quote(code)}", "--once", "--sandbox-rw", str(out))
    assert res.code == 2 and "that holds" in res.err and "--sandbox-ro" in res.err, res.err
    assert refs(repo) == before and not (out / "key").exists()


def test_a_program_path_with_dotdot_runs_as_written(ready: tuple[Path, Path], mechanism: str, tmp_path: Path) -> None:
    """`DIR/sub/../tool.sh` (docs/generators.md's `$(pwd)/../upper.sh`): bubblewrap shows only
    DIR/tool.sh, and the kernel walks through DIR/sub to get there, so that has to be shown too."""
    repo, key = ready
    k = submit_key(repo, "-m", "x", "src/user.py")
    tools = tmp_path / "tools"
    (tools / "sub").mkdir(parents=True)
    tool = tools / "tool.sh"
    tool.write_text("#!/bin/sh\necho from-tool > src/user.py\n")
    tool.chmod(0o755)
    res = work(repo, key, f"{tools}/sub/../tool.sh", "--once")
    assert res.code == 0, res.err
    assert _job(res.out)["result"] == "ok", _job(res.out)["reason"]
    assert predicate(repo, k)["sandbox"]["mechanism"] == mechanism
    res = run_genjob("show", k, "--json", cwd=repo)
    assert res.code == 0 and '"ok"' in res.out


PTRACE_PARENT = (
    "python3 -c 'import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); "
    "r = libc.ptrace(16, os.getppid(), 0, 0); sys.exit(0 if r == -1 and ctypes.get_errno() == 1 else 3)'"
)


def test_a_generator_that_ptraces_its_parent_is_denied_and_ends_in_seconds(
    ready: tuple[Path, Path], mechanism: str
) -> None:
    """Issue 34: PTRACE_ATTACH on its own `sh -c` parent stopped that sh, and the worker waited
    out the 30-minute timeout. The seccomp filter answers EPERM; the attempt ends at once."""
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    started = time.monotonic()
    res = work(repo, key, f"{PTRACE_PARENT} && echo denied > src/user.py", "--once", "--timeout", "2m")
    assert res.code == 0, res.err
    job = _job(res.out)
    assert job["result"] == "ok", job["reason"]  # exit 0: ptrace returned -1 with EPERM
    assert time.monotonic() - started < 30


def test_process_vm_readv_is_denied_too(ready: tuple[Path, Path], mechanism: str) -> None:
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    probe = (
        "python3 -c 'import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); "
        "r = libc.process_vm_readv(os.getppid(), None, 0, None, 0, 0); "
        "sys.exit(0 if r == -1 and ctypes.get_errno() == 1 else 3)'"
    )
    res = work(repo, key, f"{probe} && echo denied > src/user.py", "--once", "--timeout", "2m")
    assert res.code == 0 and _job(res.out)["result"] == "ok", _job(res.out)["reason"]


def test_the_attempt_ends_when_the_generator_exits_leaving_nothing_behind(
    ready: tuple[Path, Path], mechanism: str
) -> None:
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    marker = f"1000.{os.getpid()}{len(mechanism)}"
    started = time.monotonic()
    res = work(repo, key, f"sleep {marker} & echo left > src/user.py", "--once", "--timeout", "2m")
    assert res.code == 0 and _job(res.out)["result"] == "ok", res.err
    assert time.monotonic() - started < 20
    assert running(marker) == []


def test_the_seccomp_program_denies_by_architecture() -> None:
    from git_genjob.worker.generators.sandbox.seccomp import SECCOMP_DENIED, seccomp_program

    prog = seccomp_program()
    assert len(prog) % 8 == 0 and len(prog) // 8 < 64
    assert set(SECCOMP_DENIED) == {0xC000003E, 0x40000003, 0xC00000B7}


def test_a_root_worker_without_bubblewrap_is_told_every_way_out(
    ready: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from git_genjob.worker.generators.sandbox import choose
    from git_genjob.worker.generators.sandbox.landlock import landlock_abi

    if os.geteuid() != 0:
        pytest.skip("the refusal is a root worker's")
    repo, key = ready
    submit_key(repo, "-m", "x", "src/user.py")
    monkeypatch.setattr(choose, "bwrap_problem", lambda: "not installed")
    monkeypatch.setattr(choose, "landlock_problem", lambda *_: None)
    before = git(repo, "for-each-ref")
    res = work(repo, key, "true", "--once")
    assert res.code == 2, res.err
    abi = landlock_abi()
    assert "install bubblewrap" in res.err and f"Landlock ABI {abi}" in res.err and "GENJOB_SANDBOX=landlock" in res.err
    assert "--no-sandbox" in res.err and "read and write all root can" in res.err
    assert git(repo, "for-each-ref") == before


def test_sandbox_rw_is_writable_by_the_generator_or_refused_before_a_claim(
    ready: tuple[Path, Path], mechanism: str, tmp_path: Path
) -> None:
    repo, key = ready
    k = submit_key(repo, "-m", "x", "src/user.py")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o755)
    closed.chmod(0o755)
    before = git(repo, "for-each-ref")
    if os.geteuid() == 0 and mechanism == "bwrap":  # the generator is nobody: root's 0755 dir is not its to write
        res = work(repo, key, f"echo x > {closed}/f", "--once", "--sandbox-rw", str(closed))
        assert res.code == 2 and "nobody" in res.err and "chown nobody" in res.err, res.err
        assert git(repo, "for-each-ref") == before
        shutil.chown(closed, "nobody")
    res = work(repo, key, f"echo kept > {closed}/f && echo y > src/user.py", "--once", "--sandbox-rw", str(closed))
    assert res.code == 0 and _job(res.out)["result"] == "ok", res.err + res.out
    assert (closed / "f").read_text() == "kept\n"
    assert predicate(repo, k)["sandbox"]["rw"] == [str(closed)]
    before = git(repo, "for-each-ref")
    res = work(repo, key, "true", "--once", "--sandbox-rw", str(tmp_path / "missing"))
    assert res.code == 2 and "no such file" in res.err
    assert git(repo, "for-each-ref") == before
