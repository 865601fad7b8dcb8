"""What a worker checks before it claims a job (SPEC §8, §11): its limits and its planner's signature."""

from __future__ import annotations

from git_genjob.documents.config import read_config
from git_genjob.planner.trust import job_trust, missing_trust_error, worker_trust, worker_trust_missing
from git_genjob.storage.records import JobRecord, bundle_inputs, requeue_problem
from git_genjob.storage.store import Store


class Gate:
    """What a worker checks before it claims a job (SPEC §8, §11): the job's inputs are within
    the limits and re-hash to job.json, and its planner's signature verifies against the trust
    store of this clone's work tree (its committed .genjob/ in a fresh CI clone)."""

    def __init__(self, store: Store, trust_file: str | None = None):
        self.store = store
        self.limits = read_config(store).limits
        self.trust = worker_trust(store, trust_file)
        self.missing = trust_file is None and not self.trust.signers and worker_trust_missing(store)

    def refusal(self, record: JobRecord) -> tuple[str, str] | None:
        """(unsigned | untrusted, why) for a job no trusted planner signed; None for a claimable
        job. A damaged job raises (GenjobError)."""
        if self.missing:
            raise missing_trust_error()
        bundle_inputs(self.store, record, self.limits)
        verdict = job_trust(record.job_bytes, record.job_envelope, self.trust)
        if not verdict.ok:
            return (
                verdict.label,
                f"{verdict.detail}; never claimed (its planner signs it: git genjob init, then submit)",
            )
        resend = requeue_problem(self.store, record, self.trust.signers, self.trust.revoked)
        if resend is not None:
            return "unsigned requeue", f"{resend} (its owner decides: git genjob retry {record.key})"
        return None
