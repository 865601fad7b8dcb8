"""DSSE envelopes for every signed genjob document: receipts, jobs, drops and replay events.

One sealing function and one opening function, so that a job, an answer and a receipt are
signed and checked the same way (SPEC §2.3, §11): Ed25519 over the DSSE pre-authentication
encoding, the envelope stored as canonical JSON, and a signature that counts only when a key of
the trust store allows the document's namespace at the time that matters.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass

from git_genjob.documents.canonical import canonical_bytes, digest, parse_strict
from git_genjob.documents.errors import BadInput, Refused
from git_genjob.documents.keys import SigningKey, TrustedKey, verify_signature

JOB_TYPE = "application/vnd.genjob.job+json"
DROP_TYPE = "application/vnd.genjob.drop+json"
REPLAY_TYPE = "application/vnd.genjob.replay+json"
EVENT_TYPE = "application/vnd.genjob.event+json"  # a requeue after `sending`: its writer's word
MAX_SIGNATURES = 16


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding over byte lengths."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def seal(payload_type: str, payload: bytes, key: SigningKey) -> bytes:
    """The canonical envelope bytes around `payload`: these exact bytes are stored."""
    sig = key.sign(pae(payload_type, payload))
    return canonical_bytes(
        {
            "payloadType": payload_type,
            "payload": base64.b64encode(payload).decode(),
            "signatures": [{"keyid": key.keyid, "sig": base64.b64encode(sig).decode()}],
        }
    )


@dataclass(frozen=True)
class Sealed:
    """A parsed envelope: its exact bytes, payload and signatures (not yet checked)."""

    raw: bytes
    payload_type: str
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]

    @property
    def digest(self) -> str:
        return digest(self.raw)


def _b64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise BadInput(f"{what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(f"{what} is not valid base64") from None


def unseal(raw: bytes, payload_type: str, what: str) -> Sealed:
    """Parse a canonical envelope whose payloadType is exactly `payload_type`; BadInput otherwise."""
    doc = parse_strict(raw, f"{what} envelope")
    if not isinstance(doc, dict) or set(doc) != {"payloadType", "payload", "signatures"}:
        raise BadInput(f"{what} envelope must have exactly payloadType, payload and signatures")
    if doc["payloadType"] != payload_type:
        raise BadInput(f"{what} payloadType is {doc['payloadType']!r}, expected {payload_type!r}")
    # A digest names these exact bytes: a re-encoding would keep the signature valid but change
    # the digest, so only the one canonical form counts.
    if canonical_bytes(doc) != raw:
        raise BadInput(f"{what} envelope is not canonical JSON (SPEC §2)", "re-sign it; never re-encode an envelope")
    payload = _b64(doc["payload"], f"{what} payload")
    return Sealed(raw, payload_type, payload, _signatures(doc["signatures"], what))


def _signatures(sigs: object, what: str) -> tuple[tuple[str, bytes], ...]:
    """The envelope's (keyid, sig) entries: 1 to MAX_SIGNATURES, each a keyid string and a base64 sig."""
    if not isinstance(sigs, list) or not sigs or len(sigs) > MAX_SIGNATURES:
        raise BadInput(f"{what} has no signatures (or more than {MAX_SIGNATURES})")
    return tuple(_signature_entry(s, what) for s in sigs)


def _signature_entry(s: object, what: str) -> tuple[str, bytes]:
    if not isinstance(s, dict) or set(s) - {"keyid", "sig"} or not isinstance(s.get("keyid", ""), str):
        raise BadInput(f"{what} signature entry is malformed")
    if "sig" not in s:
        raise BadInput(f"{what} signature entry has no sig")
    return str(s.get("keyid", "")), _b64(s["sig"], f"{what} signature")


def signer_of(
    sealed: Sealed, signers: list[TrustedKey], revoked: set[bytes], when: float, namespace: str, what: str
) -> TrustedKey:
    """The trusted key that signed `sealed` for `namespace` at `when`, else Refused saying why.

    An empty trust store is an error, never a pass (STYLE: a verifier raises or returns)."""
    if not signers:
        raise Refused("the trust store .genjob/allowed_signers is empty", "add a key: git genjob trust add")
    problems = []
    for key in _verifying_keys(sealed, signers):
        found = key.problems_at(when, namespace)
        if key.public in revoked:
            found.append(f"{key.principal}: key {key.keyid} is revoked")
        if not found:
            return key
        problems += found
    if problems:
        raise Refused(f"the {what}'s signer is not trusted now: " + "; ".join(problems))
    raise Refused(f"{what}: no signature verifies with a key in .genjob/allowed_signers")


def _verifying_keys(sealed: Sealed, signers: list[TrustedKey]) -> Iterator[TrustedKey]:
    """Each signer whose key verifies one of the envelope's signatures, signature by signature."""
    message = pae(sealed.payload_type, sealed.payload)
    for _, sig in sealed.signatures:
        for key in signers:
            if verify_signature(key.public, message, sig):
                yield key
