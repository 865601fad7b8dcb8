"""`apply --all`: the apply queue (SPEC §11). Every applyable job lands in submit order, each
merged onto the branch as the ones before it left it; the first refusal stops the queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from git_genjob.documents.display import printable
from git_genjob.documents.errors import EXIT_OK, GenjobError
from git_genjob.documents.states import JobState
from git_genjob.landing.apply import Applied, apply
from git_genjob.landing.verify import check_for_target, target_tree
from git_genjob.planner.live import live_jobs
from git_genjob.storage.store import Store


@dataclass
class Stopped:
    key: str
    message: str
    hint: str | None
    details: list[str]
    exit_code: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BatchReport:
    """What `apply --all` landed, skipped (a receipt that does not verify), and where it stopped."""

    landed: list[Applied] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    stopped: Stopped | None = None
    remaining: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.stopped.exit_code if self.stopped is not None else EXIT_OK

    def to_json(self) -> dict[str, Any]:
        return {
            "landed": [a.to_json() for a in self.landed],
            "skipped": [{"key": k, "why": why} for k, why in self.skipped],
            "stopped": self.stopped.to_json() if self.stopped is not None else None,
            "remaining": self.remaining,
        }

    def lines(self) -> list[str]:
        out = []
        for a in self.landed:
            onto = f" (merged onto {a.merged_onto[:12]})" if a.merged_onto else ""
            out.append(f"applied {a.key} as {a.commit[:12]} on {a.branch}{onto}")
        out += [f"skipped {k}: {printable(why)}" for k, why in self.skipped]
        if self.stopped is not None:
            out.append(f"stopped at {self.stopped.key}: {printable(self.stopped.message)}")
            out += [f"  {printable(d)}" for d in self.stopped.details]
            if self.remaining:
                out.append("not attempted: " + ", ".join(self.remaining))
        landed = f"{len(self.landed)} landed, {len(self.skipped)} skipped"
        stop = f", stopped at {self.stopped.key}, {len(self.remaining)} not attempted" if self.stopped else ""
        return [*out, landed + stop]


def apply_all(store: Store, branch: str | None = None) -> BatchReport:
    """Apply each `done` job whose receipt verifies (checks 1-7), oldest submit first; a job whose
    receipt does not verify is skipped and named; the first apply that refuses (a conflict, the
    pre-apply hook, a dirty path) stops the queue, and the jobs after it are not attempted."""
    report = BatchReport()
    jobs = live_jobs(store, states=(JobState.DONE,))
    for n, record in enumerate(jobs):
        verdict = check_for_target(store, record, target_tree(store, branch))
        if not verdict.ok:
            report.skipped.append((record.key, "receipt does not verify: " + "; ".join(verdict.failures())))
            continue
        try:
            report.landed.append(apply(store, record.key, branch))
        except GenjobError as exc:
            report.stopped = Stopped(record.key, exc.message, exc.hint, list(exc.details), exc.exit_code)
            report.remaining = [r.key for r in jobs[n + 1 :]]
            break
    return report
