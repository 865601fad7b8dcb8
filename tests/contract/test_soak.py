"""A bounded soak (issue 9): 4 processes mixing submit, work, recover, apply and ask for
GENJOB_SOAK_SECONDS (default 60) on one repository, and through one bare remote; afterwards
every invariant holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import REPO_ROOT, git, make_repo, refs, run_genjob, setup_worker

SECONDS = os.environ.get("GENJOB_SOAK_SECONDS", "60")
GEN = """import json, os
job = json.load(open(os.environ["GENJOB_JOB"]))
for path in job["allowed_paths"]:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    open(path, "w").write("made by the soak generator\\n")
"""


def _soak(cwds: list[Path], key: Path, gen: Path, log: Path, stub_url: str, mode: str) -> list[str]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.helpers.soak",
                str(cwd),
                str(key),
                str(gen),
                SECONDS,
                str(n),
                str(log),
                stub_url,
                mode,
            ],
            cwd=REPO_ROOT,
        )
        for n, cwd in enumerate(cwds)
    ]
    for p in procs:
        assert p.wait(timeout=float(SECONDS) + 240) == 0
    lines = log.read_text().splitlines()
    crashes = [line for line in lines if line.startswith("crash")]
    assert not crashes, crashes[:5]
    return lines


def _settle(repo: Path, key: Path, gen: Path, remote: list[str]) -> None:
    """After the storm: the sweeper, then the owner's ordinary steps until nothing is left to do."""
    for _ in range(5):
        assert run_genjob("recover", *remote, cwd=repo).code == 0
        for row in json.loads(run_genjob("status", "--json", cwd=repo).out):
            if row["state"] == "unknown":
                assert run_genjob("retry", row["key"], *remote, cwd=repo).code == 0
        args = ["work", "--generator", f"exec:{sys.executable} {gen}", "--signing-key", str(key), *remote]
        assert run_genjob(*args, cwd=repo).code == 0
        if not remote:
            for row in json.loads(run_genjob("status", "--state", "done", "--json", cwd=repo).out):
                res = run_genjob("apply", row["key"], cwd=repo)
                assert res.code == 0, res.err


def _submitted(lines: list[str]) -> set[str]:
    return {line.split()[2] for line in lines if line.startswith("submit 0 ")}


@pytest.mark.slow
def test_soak_on_one_repository(tmp_path: Path, stub) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    key = setup_worker(repo)
    gen = tmp_path / "gen.py"
    gen.write_text(GEN)
    lines = _soak([repo] * 4, key, gen, tmp_path / "soak.log", stub.url, "local")
    keys = _submitted(lines)
    assert len(keys) >= 8, lines[-10:]
    _settle(repo, key, gen, [])
    git(repo, "fsck", "--strict")
    rows = {r["key"]: r["state"] for r in json.loads(run_genjob("status", "--all", "--json", cwd=repo).out)}
    assert {k: rows.get(k) for k in keys} == dict.fromkeys(keys, "applied")  # none lost
    landed = git(repo, "log", "--format=%(trailers:key=Genjob-Key,valueonly)").split()
    assert sorted(landed) == sorted(keys)  # each applied exactly once
    assert not [r for r in refs(repo) if r.startswith("refs/genjob/jobs/")]
    assert not list((repo / ".git").rglob("*.lock"))
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert run_genjob("audit", cwd=repo).code == 0
    assert stub.count <= 5  # five distinct questions, each asked once, every other ask a replay


@pytest.mark.slow
def test_soak_through_one_bare_remote(tmp_path: Path, stub) -> None:  # type: ignore[no-untyped-def]
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    seed = make_repo(tmp_path / "seed")
    key = setup_worker(seed)
    git(seed, "remote", "add", "origin", str(bare))
    git(seed, "push", "-q", "origin", "main")
    clones = []
    for n in range(4):
        clone = tmp_path / f"c{n}"
        git(tmp_path, "clone", "-q", str(bare), str(clone))
        assert run_genjob("init", cwd=clone).code == 0
        clones.append(clone)
    gen = tmp_path / "gen.py"
    gen.write_text(GEN)
    lines = _soak(clones, key, gen, tmp_path / "soak.log", stub.url, "remote")
    keys = _submitted(lines)
    assert len(keys) >= 8, lines[-10:]
    final = clones[0]
    assert run_genjob("fetch", cwd=final).code == 0
    _settle(final, key, gen, ["--remote", "origin"])
    git(bare, "fsck", "--strict")
    rows = {r["key"]: r["state"] for r in json.loads(run_genjob("status", "--all", "--json", cwd=final).out)}
    assert {k: rows.get(k) for k in keys} == dict.fromkeys(keys, "done")  # every job once, none lost
    generated = [line for line in lines if line.startswith("work 0 ")]
    assert generated  # workers did work through the remote
    for k in keys:  # exactly one receipt per job: one attempt finished, none resent
        shown = json.loads(run_genjob("show", k, "--json", cwd=final).out)
        assert [a["state"] for a in shown["attempt_records"]].count("finished") == 1
