"""A simulated CI fleet on one bare remote (issue 25): 16 runner processes, each
`git genjob work --remote origin --max-jobs K` in its own fresh clone, cancelled at random points
as a forge cancels (SIGINT or SIGTERM to the group, then SIGKILL), then `recover`.

bench/fleet.py drives it (a bigger run: `python bench/fleet.py`); this is its bounded version
with a fixed seed. The generator runs in the sandbox and appends its job's instruction to a log
outside it (work --sandbox-rw), so a job generated twice is seen, not inferred.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers.common import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))

import fleet  # noqa: E402


def test_a_cancelled_fleet_claims_each_job_once_and_loses_none(tmp_path: Path) -> None:
    result = fleet.run(runners=16, jobs=24, max_jobs=2, cancel=0.5, seed=25, root=str(tmp_path), timeout=12)
    seen = {k: v for k, v in result.items() if k not in ("round1", "round2")}
    assert result["round1"]["started"] == 16 and result["round1"]["cancelled"] >= 1, result["round1"]
    assert all(code in (0, -2, -9, -15, 130) for code in result["round1"]["exits"]), result["round1"]
    assert result["round2"]["exits"] == [0] * 16, result["round2"]
    # 0 double claims: no job generated twice, none sent by two attempts
    assert result["generated_twice"] == [] and result["sent_twice"] == [], seen
    # 0 lost jobs: each is done (generated exactly once) or unknown (held for its owner), and no
    # attempt of a cancelled runner is left claimed or sending
    assert result["lost"] == [] and result["done_not_generated"] == [] and result["stuck_attempts"] == [], seen
    assert sum(result["states"].values()) == 24 and set(result["states"]) <= {"done", "unknown"}, seen
    # the slow job's runner was cancelled after its request went out: the stopped runner ended its
    # attempt `unknown` itself (or, killed before it could, recover did), never resent, and the
    # owner's retry finished it (the first unknown key: fleet-00000)
    recovered = result["recover"]
    assert result["states"]["unknown"] >= max(1, len(recovered["unknown"])), seen
    assert result["retried"] == {"key": "fleet-00000", "state": "done", "exits": [0]}
    assert fleet.holds(result)


def test_eight_sharded_runners_claim_160_jobs_once_each_and_seldom_race(tmp_path: Path) -> None:
    """SPEC §12.3's acceptance: 8 fresh clones of one bare remote, `work --shard I/8` each, run as
    real processes at once on 160 queued jobs: every job is done once (one attempt, one ok
    receipt), none is left queued, and at most one race is lost per ten claims."""
    result = fleet.run_sharded(str(tmp_path), runners=8, jobs=160)
    jobs = result["jobs_seen"]
    assert result["exits"] == [0] * 8, result["exits"]
    assert len(jobs) == 160 and all(j == {"state": "done", "attempts": 1, "receipt": "ok"} for j in jobs.values()), {
        k: j for k, j in jobs.items() if j.get("state") != "done" or j.get("attempts") != 1
    }
    assert result["results"].get("ok") == 160 and result["claims"] == 160, result["results"]
    assert result["lost_per_claim"] <= 0.1, (result["lost"], result["lost_keys"])
