"""The summary note in refs/notes/genjob: a rendering of the verified receipt, never a claim.

`git log --notes=genjob` shows this text to a reviewer, and anyone who can push the notes ref can
rewrite it. So the note counts only when it is byte for byte what `render` makes of the receipt
and job that verify on its commit (SPEC §11, §12.2): apply writes `render(...)`, and audit, log
and the pre-push check render again and compare. Every other note is a forged summary: named,
and quoted escaped, never shown as if it were one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from git_genjob.documents.display import printable, usage_text
from git_genjob.documents.keys import TrustedKey
from git_genjob.documents.receipt import GeneratorInfo, Predicate

FORGED = "forged summary note"
QUOTE_LIMIT = 400  # bytes of a forged note quoted back to the reader


@dataclass(frozen=True)
class Party:
    """A key as the trust store names it: principal and fingerprint."""

    name: str
    keyid: str

    def __str__(self) -> str:
        return f"{self.name} ({self.keyid})"


@dataclass(frozen=True)
class Facts:
    """What a summary says, every field read from verified data: the receipt's envelope (its
    digest and predicate), the signer and planner keys that verified, and the signed job."""

    key: str
    receipt: str  # sha256:… of the envelope
    pred: Predicate
    signer: Party
    planner: Party | None  # None: a job without a planner signature
    instruction: str  # the job's instruction as a commit message carries it


def generator_label(gen: GeneratorInfo) -> str:
    """`kind:detail` of a generator, as the disclosure trailer and the note name it."""
    kind = gen.kind
    if gen.model:
        detail = gen.model
    elif gen.command and gen.command.split():
        detail = os.path.basename(gen.command.split()[0])
        if not detail.isprintable() or len(detail) > 128:
            detail = kind
    elif gen.endpoint:
        detail = gen.endpoint
    else:
        detail = kind
    return f"{kind}:{detail}"


def _first_line(instruction: str) -> str:
    first = instruction.splitlines()[0] if instruction else ""
    return first[:99] + "…" if len(first) > 100 else first


def render(f: Facts, usage: bool = True) -> bytes:
    """The summary note of a commit that landed this receipt (SPEC §11); with the gateway's totals
    when the receipt has them (`usage=False`: as apply wrote it before it printed them)."""
    lines = [f"genjob {f.key} ok: signed by {f.signer}, receipt {f.receipt}"]
    if f.pred.worker_id != f.signer.name:  # the worker's own id, which no key vouches for
        lines.append(f"  worker id: {f.pred.worker_id} (self-asserted, not verified)")
    lines += [
        f"  instruction: {_first_line(f.instruction)}",
        f"  generator: {generator_label(f.pred.generator)}, sandbox {f.pred.confinement.summary()}",
        f"  planner: {f.planner}" if f.planner else "  planner: unsigned job",
    ]
    totals = (f.pred.model or {}).get("usage") if usage else None
    if isinstance(totals, dict):
        lines.append(f"  model: {usage_text(totals)}")
    return "".join(printable(line) + "\n" for line in lines).encode("utf-8")


def legacy(f: Facts) -> bytes:
    """The summary apply wrote before it was a rendering (still accepted where it is exact)."""
    planner = f"{f.planner.keyid} ({f.planner.name})" if f.planner else "unsigned job"
    lines = [
        f"genjob {f.key} ok: signed by {f.signer.keyid} (worker {f.pred.worker_id}), receipt {f.receipt}",
        f"  instruction: {_first_line(f.instruction)}",
        f"  generator: {generator_label(f.pred.generator)}, sandbox {f.pred.confinement.summary()}",
        f"  planner: {planner}",
    ]
    return "".join(printable(line) + "\n" for line in lines).encode("utf-8")


def renderings(f: Facts) -> list[bytes]:
    return [render(f), legacy(f)] + ([render(f, usage=False)] if f.pred.model is not None else [])


def check(note: bytes, expected: list[bytes], combined: bool = False) -> bool:
    """Whether `note` is one of the `expected` renderings. A `combined` note (written before the
    receipts ref split) holds the summary's first line and the JSON envelope line: its non-JSON
    lines must then be a rendering or a rendering's first line."""
    if note in expected:
        return True
    if not combined:
        return False
    text = b"".join(line + b"\n" for line in note.splitlines() if not line.lstrip().startswith(b"{"))
    return any(text == want or text == want.splitlines(keepends=True)[0] for want in expected)


def quoted(note: bytes) -> str:
    """A forged note as it may be shown: escaped, on one line, at most QUOTE_LIMIT bytes."""
    head = note[:QUOTE_LIMIT]
    text = head.decode("utf-8", "backslashreplace")
    shown = printable(text.replace("\n", "\\n"))
    return shown + (f"… ({len(note)} bytes)" if len(note) > QUOTE_LIMIT else "")


def expected_renderings(facts: Facts, keys: list[TrustedKey]) -> list[bytes]:
    """Every summary `facts` may render as, today's form first: signer and planner named as the
    facts name them or as any of `keys` (the trust that verified it, the commit's own) names
    their key, in today's form or the one before it."""

    def names(party: Party | None) -> list[Party | None]:
        if party is None:
            return [None]
        found = [Party(k.principal, k.keyid) for k in keys if k.keyid == party.keyid]
        return list(dict.fromkeys([party, *found]))

    expected: list[bytes] = []
    for signer in names(facts.signer):
        assert signer is not None
        for planner in names(facts.planner):
            named = Facts(facts.key, facts.receipt, facts.pred, signer, planner, facts.instruction)
            for want in renderings(named):
                if want not in expected:
                    expected.append(want)
    return expected
