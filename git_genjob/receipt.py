"""DSSE envelope around an in-toto Statement v1 (SPEC §2.3): build, sign, parse, verify."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from git_genjob.canonical import canonical_bytes, digest, is_digest, parse_strict
from git_genjob.errors import BadInput, Refused
from git_genjob.keys import SigningKey, TrustedKey, verify_signature
from git_genjob.paths import check_path

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


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding over byte lengths."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def job_subject(key: str, job_digest: str) -> dict[str, Any]:
    return {"name": f"genjob-job:{key}", "digest": {"sha256": job_digest.removeprefix("sha256:")}}


def build_statement(predicate: dict[str, Any]) -> dict[str, Any]:
    outputs: dict[str, str | None] = predicate["outputs"]
    subjects = [
        {"name": path, "digest": {"sha256": value.removeprefix("sha256:")}}
        for path, value in sorted(outputs.items())
        if value is not None
    ]
    if predicate["status"] != "ok" or not subjects:
        subjects = [job_subject(predicate["key"], predicate["job_digest"])]
    return {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": PREDICATE_TYPE, "predicate": predicate}


def sign_statement(statement: dict[str, Any], key: SigningKey) -> bytes:
    """The canonical envelope bytes: these exact bytes are stored and referenced by digest."""
    payload = canonical_bytes(statement)
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": key.keyid, "sig": base64.b64encode(sig).decode()}],
    }
    return canonical_bytes(envelope)


@dataclass(frozen=True)
class Envelope:
    raw: bytes
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]
    statement: dict[str, Any]

    @property
    def digest(self) -> str:
        return digest(self.raw)

    @property
    def predicate(self) -> dict[str, Any]:
        return dict(self.statement["predicate"])


def _b64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise BadInput(f"receipt {what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(f"receipt {what} is not valid base64") from None


def parse_envelope(raw: bytes) -> Envelope:
    """§6 check 1: the envelope parses and its types are exactly as in §2.3."""
    doc = parse_strict(raw, "receipt envelope")
    if not isinstance(doc, dict) or set(doc) != {"payloadType", "payload", "signatures"}:
        raise BadInput("receipt envelope must have exactly payloadType, payload and signatures")
    if doc["payloadType"] != PAYLOAD_TYPE:
        raise BadInput(f"receipt payloadType is {doc['payloadType']!r}, expected {PAYLOAD_TYPE!r}")
    payload = _b64(doc["payload"], "payload")
    sigs = doc["signatures"]
    if not isinstance(sigs, list) or not sigs:
        raise BadInput("receipt has no signatures")
    parsed = []
    for s in sigs:
        if not isinstance(s, dict) or not isinstance(s.get("keyid", ""), str) or "sig" not in s:
            raise BadInput("receipt signature entry is malformed")
        parsed.append((str(s.get("keyid", "")), _b64(s["sig"], "signature")))
    statement = parse_strict(payload, "receipt statement")
    _check_statement(statement)
    return Envelope(raw, payload, tuple(parsed), statement)


def _check_statement(st: Any) -> None:
    if not isinstance(st, dict) or st.get("_type") != STATEMENT_TYPE:
        raise BadInput(f"receipt statement _type is not {STATEMENT_TYPE}")
    if st.get("predicateType") != PREDICATE_TYPE:
        raise BadInput(f"receipt predicateType is {st.get('predicateType')!r}, expected {PREDICATE_TYPE!r}")
    pred = st.get("predicate")
    if not isinstance(pred, dict) or set(pred) != PREDICATE_FIELDS:
        raise BadInput("receipt predicate does not have exactly the fields of urn:git-genjob:receipt:v1")
    if pred["status"] not in STATUSES:
        raise BadInput(f"receipt status {pred['status']!r} is not one of {', '.join(STATUSES)}")
    if not isinstance(pred["outputs"], dict) or not is_digest(pred["job_digest"]):
        raise BadInput("receipt outputs must be an object and job_digest a sha256 digest")
    for path, value in pred["outputs"].items():
        if value is not None and not is_digest(value):
            raise BadInput(f"receipt output {path!r} has a malformed digest")
    if not isinstance(st.get("subject"), list) or not st["subject"]:
        raise BadInput("receipt statement has no subject")


def check_signature(env: Envelope, signers: list[TrustedKey], revoked: set[bytes], when: float) -> TrustedKey:
    """§6 check 2: a signature verifies with a trusted, in-window, unrevoked key; returns it."""
    if not signers:
        raise Refused("the trust store .genjob/allowed_signers is empty", "add a worker key: git genjob trust add")
    message = pae(PAYLOAD_TYPE, env.payload)
    problems = []
    for _, sig in env.signatures:
        for key in signers:
            if not verify_signature(key.public, message, sig):
                continue
            found = key.problems_at(when)
            if key.public in revoked:
                found.append(f"{key.principal}: key {key.keyid} is revoked")
            if not found:
                return key
            problems += found
    if problems:
        raise Refused("the receipt's signer is not trusted now: " + "; ".join(problems))
    raise Refused("no signature verifies with a key in .genjob/allowed_signers")


def check_output_paths(pred: dict[str, Any], allowed: list[str]) -> list[str]:
    """§6 check 5: output paths within allowed_paths and each valid (§8)."""
    out = []
    for path in pred["outputs"]:
        try:
            check_path(path, what="output path")
        except BadInput as exc:
            out.append(exc.message)
            continue
        if path not in allowed:
            out.append(f"output {path} is not an allowed path")
    return out
