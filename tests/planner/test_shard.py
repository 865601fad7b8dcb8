"""`work --shard I/N` (SPEC §12.3): which job a runner picks, and a bad spec refused before any claim."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from git_genjob.planner.live import Head
from git_genjob.worker.picker import RESERVE, Picker, parse_shard, shard_of
from tests.helpers.common import make_repo, refs, run_genjob, run_genjob_process, setup_worker, submit_key


def test_shard_of_is_the_documented_hash() -> None:
    import hashlib

    for key in ("a", "fleet-00001", "job-x"):
        assert shard_of(key, 8) == int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 8
    assert parse_shard("3/8") == (3, 8) and parse_shard("0/1") == (0, 1) and parse_shard(None) is None


def _queue(n: int) -> list[Head]:
    return [Head(f"job-{i:04d}", None, "queued", f"2026-01-01T00:00:{i:06d}") for i in range(n)]  # type: ignore[arg-type]


def test_a_sharded_runner_takes_its_own_shard_oldest_first_then_steals_past_the_owners_next() -> None:
    queue = _queue(200)
    picker = Picker(None, shard=(2, 8), rng=random.Random(1), read=lambda _: list(queue))  # type: ignore[arg-type]
    mine = [h.key for h in queue if shard_of(h.key, 8) == 2]
    taken = [picker.next().key for _ in mine]  # type: ignore[union-attr]
    assert taken == mine  # its own shard, oldest first
    stolen = picker.next()
    assert stolen is not None and shard_of(stolen.key, 8) != 2
    rest = [h.key for h in picker.candidates if shard_of(h.key, 8) == shard_of(stolen.key, 8)]
    owners_next = [h.key for h in queue if shard_of(h.key, 8) == shard_of(stolen.key, 8)][:RESERVE]
    assert stolen.key not in owners_next and set(owners_next) <= set(rest)


def test_stealers_spread_over_the_other_shards() -> None:
    queue = [h for h in _queue(400) if shard_of(h.key, 8) != 0]
    firsts = set()
    for seed in range(16):
        picker = Picker(None, shard=(0, 8), rng=random.Random(seed), read=lambda _: list(queue))  # type: ignore[arg-type]
        head = picker.next()
        assert head is not None
        firsts.add(head.key)
    assert len(firsts) >= 12  # 16 idle runners: (almost) 16 different jobs, not one herd


def test_a_runner_without_a_shard_starts_among_the_oldest_few() -> None:
    queue = _queue(100)
    picks = {
        Picker(None, rng=random.Random(seed), read=lambda _: list(queue)).next().key  # type: ignore[arg-type,union-attr]
        for seed in range(20)
    }
    assert len(picks) > 3 and picks <= {h.key for h in queue[:16]}


@pytest.mark.parametrize("spec", ["8/8", "-1/4", "a/b", "0/0", "3", "1/2/3"])
def test_a_bad_shard_is_exit_2_with_the_form_and_nothing_is_claimed(tmp_path: Path, spec: str) -> None:
    repo = make_repo(tmp_path / "repo")
    key = setup_worker(repo)
    job = submit_key(repo, "-m", "do it", "src/user.py")
    before = refs(repo)
    res = run_genjob("work", "--generator", "exec:true", "--signing-key", str(key), f"--shard={spec}", cwd=repo)
    assert res.code == 2, res
    assert "I/N" in res.err and "--shard 0/8" in res.err, res.err
    assert refs(repo) == before
    env_res = run_genjob_process(
        "work", "--generator", "exec:true", "--signing-key", str(key), "--json", cwd=repo, env={"GENJOB_SHARD": spec}
    )
    assert env_res.code == 2 and "GENJOB_SHARD" in env_res.err, env_res
    assert refs(repo) == before
    status = json.loads(run_genjob("status", "--json", cwd=repo).out)
    assert [j["state"] for j in status if j["key"] == job] == ["queued"], status


def test_shard_with_non_ascii_digits_is_bad_input_not_a_crash() -> None:
    """Attack: '²/8' passed str.isdigit and crashed int(); '١/٨' was read as 1/8."""
    from git_genjob.documents.errors import BadInput

    for spec in ("²/8", "1/⁸", "١/٨"):
        with pytest.raises(BadInput):
            parse_shard(spec)
