"""Issue 34 item 7: where a worker cannot make user namespaces (Ubuntu 24.04's AppArmor default
for unprivileged users, modelled here by running the worker inside `bwrap --unshare-user
--disable-userns` as uid 1000), bubblewrap cannot run, the worker falls back to Landlock by
itself, and the receipt says which mechanism confined the generator."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import run_genjob, setup_worker, submit_key
from tests.worker.test_generators import predicate


def _bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bubblewrap is missing: .ci/run installs it")
        pytest.skip("bubblewrap is not installed here")
    probe = subprocess.run([found, "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "true"],
                           capture_output=True, timeout=30)  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"this kernel or bwrap has no --disable-userns: {probe.stderr.decode()[-200:]}")
    return found


def test_a_worker_that_cannot_make_user_namespaces_runs_under_landlock_and_says_so(repo: Path) -> None:
    from git_genjob.worker.generators.sandbox.landlock import landlock_abi

    bwrap = _bwrap()
    if not landlock_abi():
        pytest.skip("this kernel has no Landlock")
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "write it", "--create", "out.txt")
    top = str(repo.parent)
    os.chmod(top, 0o755)
    outer = [bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--disable-userns"]
    outer += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", top, top]
    outer += ["--setenv", "HOME", top, "--chdir", str(repo), "--"]
    cmd = [sys.executable, "-m", "git_genjob", "work", "--generator", "exec:sh -c 'echo confined > out.txt'"]
    cmd += ["--signing-key", str(key), "--once", "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GIT_CONFIG_GLOBAL": "/dev/null"}
    env.pop("GENJOB_SANDBOX", None)
    proc = subprocess.run([*outer, *cmd], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pred = predicate(repo, k)
    assert pred["status"] == "ok", pred
    assert pred["sandbox"]["mechanism"] == "landlock", pred["sandbox"]
    doctor = subprocess.run([*outer, sys.executable, "-m", "git_genjob", "doctor"], capture_output=True,
                            text=True, timeout=120, env=env)  # fmt: skip
    assert "warn sandbox.bwrap" in doctor.stdout and "AppArmor profile" in doctor.stdout, doctor.stdout
    assert "exec generators run under landlock" in doctor.stdout
    assert run_genjob("apply", k, cwd=repo).code == 0 and (repo / "out.txt").read_text() == "confined\n"
