"""DSSE envelope around an in-toto Statement v1 (SPEC §2.3): build, sign, parse, verify."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from git_genjob.documents.attempts import check_choice, check_int, check_label, check_oid, check_text, check_time
from git_genjob.documents.canonical import canonical_bytes, digest, is_digest, parse_strict
from git_genjob.documents.errors import BadInput
from git_genjob.documents.keys import NAMESPACE, SigningKey, TrustedKey
from git_genjob.documents.paths import check_path
from git_genjob.documents.signing import Sealed, seal, signer_of, unseal

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:git-genjob:receipt:v1"
STATUSES = ("ok", "rejected", "aborted")
PREDICATE_FIELDS = {
    "job_digest",
    "key",
    "claim",
    "status",
    "reason",
    "outputs",
    "ignored",
    "worker_id",
    "attempt",
    "generator",
    "replays",
    "started_at",
    "finished_at",
}
OPTIONAL_FIELDS = {"sandbox", "model"}  # model: the gateway's calls and usage (SPEC §12.1)
_OLD_OPTIONAL = {"sandbox"}  # absent in receipts signed before the sandbox (read as mechanism none)


def job_subject(key: str, job_digest: str) -> dict[str, Any]:
    return {"name": f"genjob-job:{key}", "digest": {"sha256": job_digest.removeprefix("sha256:")}}


def subjects_for(predicate: dict[str, Any]) -> list[dict[str, Any]]:
    """One subject per output (the job itself for a status other than ok, or no outputs)."""
    outputs: dict[str, str | None] = predicate["outputs"]
    subjects = [
        {"name": path, "digest": {"sha256": value.removeprefix("sha256:")}}
        for path, value in sorted(outputs.items())
        if value is not None
    ]
    if predicate["status"] != "ok" or not subjects:
        subjects = [job_subject(predicate["key"], predicate["job_digest"])]
    return subjects


def build_statement(predicate: dict[str, Any]) -> dict[str, Any]:
    Predicate.from_dict(predicate)  # a worker never signs what a verifier would refuse to parse
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects_for(predicate),
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def sign_statement(statement: dict[str, Any], key: SigningKey) -> bytes:
    """The canonical envelope bytes: these exact bytes are stored and referenced by digest."""
    return seal(PAYLOAD_TYPE, canonical_bytes(statement), key)


GENERATOR_KINDS = ("exec", "http", "openai", "out-of-band")
# bwrap, landlock: the confinement an exec generator ran in; none: it ran unconfined (work
# --no-sandbox, or outputs signed out of band); no-process: an http:/openai: generator, where
# no program of the generator's ran on the worker (the worker made the call and wrote the answer).
SANDBOX_MECHANISMS = ("bwrap", "landlock", "none", "no-process")
# none: its own empty network namespace; tcp-denied: Landlock denies every TCP bind and connect
# (UDP and Unix sockets are not covered); hosts: only through the worker's proxy to the listed
# hosts; all: the worker's network.
SANDBOX_NETWORKS = ("none", "tcp-denied", "hosts", "all")
SANDBOX_FIELDS = {"mechanism", "network", "hosts", "ro", "rw", "limits"}


@dataclass(frozen=True)
class SandboxInfo:
    """The receipt's record of the confinement the generator ran in (docs/formats.md)."""

    mechanism: str
    network: str = "all"
    hosts: tuple[str, ...] = ()
    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    limits: dict[str, int] | None = None

    @property
    def confined(self) -> bool:
        """Whether `[policy] require_sandbox` accepts it."""
        return self.mechanism != "none"

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "network": self.network,
            "hosts": list(self.hosts),
            "ro": list(self.ro),
            "rw": list(self.rw),
            "limits": dict(self.limits) if self.limits is not None else None,
        }

    def summary(self) -> str:
        """One line for verify and show: `bwrap, network none, +2 ro`."""
        if self.mechanism in ("none", "no-process"):
            return self.mechanism
        extra = [f"+{len(x)} {n}" for n, x in (("ro", self.ro), ("rw", self.rw)) if x]
        net = f"network {self.network}" + (f" ({', '.join(self.hosts)})" if self.hosts else "")
        return ", ".join([self.mechanism, net, *extra])


UNSANDBOXED = SandboxInfo("none")


def _sandbox(doc: object) -> SandboxInfo:
    w = "receipt predicate sandbox"
    if not isinstance(doc, dict) or set(doc) != SANDBOX_FIELDS:
        raise BadInput(f"{w} must have exactly {', '.join(sorted(SANDBOX_FIELDS))}")
    hosts, ro, rw = (_sandbox_list(doc, name) for name in ("hosts", "ro", "rw"))
    limits = _sandbox_limits(doc["limits"])
    return SandboxInfo(
        check_choice(doc["mechanism"], f"{w} mechanism", SANDBOX_MECHANISMS),
        check_choice(doc["network"], f"{w} network", SANDBOX_NETWORKS),
        hosts,
        ro,
        rw,
        limits,
    )


def _sandbox_list(doc: dict[str, object], name: str) -> tuple[str, ...]:
    """One of the sandbox's lists (hosts, ro, rw): at most 256 labels."""
    w = "receipt predicate sandbox"
    value = doc[name]
    if not isinstance(value, list) or len(value) > 256:
        raise BadInput(f"{w} {name} must be a list of at most 256 strings")
    return tuple(check_label(x, f"{w} {name} entry", 4096) for x in value)


def _sandbox_limits(limits: object) -> dict[str, int] | None:
    """The sandbox's limits: at most 16 names -> counts, or null."""
    if limits is None:
        return None
    w = "receipt predicate sandbox"
    if not isinstance(limits, dict) or not all(isinstance(k, str) for k in limits) or len(limits) > 16:
        raise BadInput(f"{w} limits must be an object of integers or null")
    return {check_label(k, f"{w} limit name"): check_int(v, f"{w} limit {k}", 0) for k, v in limits.items()}


_FP_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class GeneratorInfo:
    kind: str
    endpoint: str | None
    model: str | None
    command: str | None

    def to_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "endpoint": self.endpoint, "model": self.model, "command": self.command}


@dataclass(frozen=True)
class Predicate:
    """The receipt predicate (urn:git-genjob:receipt:v1), every field typed and bounded."""

    job_digest: str
    key: str
    claim: str
    status: str
    reason: str
    outputs: dict[str, str | None]
    ignored: tuple[str, ...]
    worker_id: str
    attempt: int
    generator: GeneratorInfo
    replays: tuple[str, ...]
    started_at: str
    finished_at: str
    sandbox: SandboxInfo | None = None  # None: a receipt from before the field (no sandbox known)
    model: dict[str, Any] | None = None  # the gateway's calls and usage; None: no gateway

    @property
    def confinement(self) -> SandboxInfo:
        """The sandbox in force; an old receipt without the field counts as unconfined."""
        return self.sandbox if self.sandbox is not None else UNSANDBOXED

    @classmethod
    def from_dict(cls, doc: object) -> Predicate:
        """Parse a predicate; BadInput names the first field that is off (§6 check 1)."""
        if not isinstance(doc, dict) or not PREDICATE_FIELDS <= set(doc) <= PREDICATE_FIELDS | OPTIONAL_FIELDS:
            raise BadInput("receipt predicate does not have exactly the fields of urn:git-genjob:receipt:v1")
        w = "receipt predicate"
        if not is_digest(doc["job_digest"]):
            raise BadInput(f"{w} job_digest is not a sha256 digest")
        outputs = _outputs(doc["outputs"])
        ignored, replays = _ignored(doc["ignored"]), _replays(doc["replays"])
        return cls(
            job_digest=doc["job_digest"],
            key=check_label(doc["key"], f"{w} key"),
            claim=check_oid(doc["claim"], f"{w} claim"),
            status=check_choice(doc["status"], f"{w} status", STATUSES),
            reason=check_text(doc["reason"], f"{w} reason"),
            outputs=outputs,
            ignored=ignored,
            worker_id=check_label(doc["worker_id"], f"{w} worker_id"),
            attempt=check_int(doc["attempt"], f"{w} attempt", 1),
            generator=_generator(doc["generator"]),
            replays=replays,
            started_at=check_time(doc["started_at"], f"{w} started_at"),
            finished_at=check_time(doc["finished_at"], f"{w} finished_at"),
            sandbox=_sandbox(doc["sandbox"]) if "sandbox" in doc else None,
            model=_model(doc["model"]) if "model" in doc else None,
        )

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"sandbox": self.sandbox.to_dict()} if self.sandbox is not None else {}
        if self.model is not None:
            extra["model"] = self.model
        return extra | {
            "job_digest": self.job_digest,
            "key": self.key,
            "claim": self.claim,
            "status": self.status,
            "reason": self.reason,
            "outputs": dict(self.outputs),
            "ignored": list(self.ignored),
            "worker_id": self.worker_id,
            "attempt": self.attempt,
            "generator": self.generator.to_dict(),
            "replays": list(self.replays),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


def _outputs(outputs: object) -> dict[str, str | None]:
    """The predicate's outputs: path -> sha256 digest, or None for a deleted file."""
    if not isinstance(outputs, dict):
        raise BadInput("receipt predicate outputs must be an object")
    for path, value in outputs.items():
        if value is not None and not is_digest(value):
            raise BadInput(f"receipt output {path!r} has a malformed digest")
    return dict(outputs)


def _ignored(ignored: object) -> tuple[str, ...]:
    """The predicate's ignored paths, each at most 4096 characters."""
    if not isinstance(ignored, list) or not all(isinstance(x, str) and len(x) <= 4096 for x in ignored):
        raise BadInput("receipt predicate ignored must be a list of paths")
    return tuple(ignored)


def _replays(replays: object) -> tuple[str, ...]:
    """The predicate's replay fingerprints, each 64 lowercase hex digits."""
    if not isinstance(replays, list) or not all(isinstance(x, str) and _FP_RE.match(x) for x in replays):
        raise BadInput("receipt predicate replays must be a list of 64-hex fingerprints")
    return tuple(replays)


def _model(doc: object) -> dict[str, Any]:
    w = "receipt predicate model"
    if not isinstance(doc, dict) or not {"calls", "usage"} <= set(doc) <= {"calls", "usage", "budget"}:
        raise BadInput(f"{w} must have calls and usage (and budget)")
    if not isinstance(doc["calls"], list) or not isinstance(doc["usage"], dict):
        raise BadInput(f"{w} calls must be a list and usage an object")
    return dict(doc)


def sandbox_problems(pred: Predicate, require_sandbox: bool) -> list[str]:
    """Check 4 under `[policy] require_sandbox = true`: the generator ran confined."""
    if not require_sandbox or pred.confinement.confined:
        return []
    why = "the receipt records no sandbox" if pred.sandbox is None else "its generator ran without a sandbox"
    return [f"{why}, and .genjob/config.toml requires one ([policy] require_sandbox = true)"]


def _generator(doc: object) -> GeneratorInfo:
    w = "receipt predicate generator"
    if not isinstance(doc, dict) or set(doc) != {"kind", "endpoint", "model", "command"}:
        raise BadInput(f"{w} must have exactly kind, endpoint, model and command")

    def opt(name: str) -> str | None:
        value = doc[name]
        if value is None:
            return None
        # A command may span lines (sh -c); only its first word ever reaches a commit message.
        return check_text(value, f"{w} {name}") if name == "command" else check_label(value, f"{w} {name}", 4096)

    return GeneratorInfo(
        check_choice(doc["kind"], f"{w} kind", GENERATOR_KINDS), opt("endpoint"), opt("model"), opt("command")
    )


@dataclass(frozen=True)
class Envelope:
    raw: bytes
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]
    statement: dict[str, Any]
    predicate: Predicate

    @property
    def digest(self) -> str:
        return digest(self.raw)


def parse_envelope(raw: bytes) -> Envelope:
    """§6 check 1: the envelope parses, is canonical, and its types are exactly as in §2.3."""
    sealed = unseal(raw, PAYLOAD_TYPE, "receipt")
    statement = parse_strict(sealed.payload, "receipt statement")
    if canonical_bytes(statement) != sealed.payload:
        raise BadInput("receipt statement is not canonical JSON (SPEC §2)")
    predicate = _check_statement(statement)
    return Envelope(raw, sealed.payload, sealed.signatures, statement, predicate)


def _check_statement(st: Any) -> Predicate:
    if not isinstance(st, dict) or set(st) != {"_type", "subject", "predicateType", "predicate"}:
        raise BadInput("receipt statement must have exactly _type, subject, predicateType and predicate")
    if st["_type"] != STATEMENT_TYPE:
        raise BadInput(f"receipt statement _type is not {STATEMENT_TYPE}")
    if st["predicateType"] != PREDICATE_TYPE:
        raise BadInput(f"receipt predicateType is {st['predicateType']!r}, expected {PREDICATE_TYPE!r}")
    pred = Predicate.from_dict(st["predicate"])
    # The subject is what other in-toto tools read: it must say what the predicate says.
    if st["subject"] != subjects_for(pred.to_dict()):
        raise BadInput("receipt statement subject does not match the predicate's outputs")
    return pred


def check_signature(env: Envelope, signers: list[TrustedKey], revoked: set[bytes], when: float) -> TrustedKey:
    """§6 check 2: a signature verifies with a trusted, in-window, unrevoked key; returns it."""
    sealed = Sealed(env.raw, PAYLOAD_TYPE, env.payload, env.signatures)
    return signer_of(sealed, signers, revoked, when, NAMESPACE, "receipt")


def check_output_paths(pred: Predicate, allowed: list[str]) -> list[str]:
    """§6 check 5: output paths within allowed_paths and each valid (§8)."""
    out = []
    for path in pred.outputs:
        try:
            check_path(path, what="output path")
        except BadInput as exc:
            out.append(exc.message)
            continue
        if path not in allowed:
            out.append(f"output {path} is not an allowed path")
    return out
