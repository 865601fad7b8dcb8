"""`show`'s human text: the document `queue.show` returns, as the lines `git genjob show` prints."""

from __future__ import annotations

from typing import Any

from git_genjob.documents.display import printable, usage_text


def show_lines(doc: dict[str, Any]) -> list[str]:
    """`show`'s human text for the document `show` returns."""
    shown = doc.get("commit_shown")
    head = [printable(f"commit   {shown} is the landing of job {doc['key']}")] if shown else []
    return head + _identity_lines(doc) + _work_lines(doc) + _outcome_lines(doc)


def _identity_lines(doc: dict[str, Any]) -> list[str]:
    """The job's key, state, digest and origin, and the jobs it supersedes or is superseded by."""
    meta = doc["meta"]
    lines = [
        f"job      {doc['key']}  ({doc['state']}{', archived' if doc['archived'] else ''})",
        f"digest   {doc['digest']}",
        f"created  {printable(str(meta.get('created_at')))} by {printable(str(meta.get('submitter')))}",
        f"base     {printable(str(meta.get('base')))}",
    ]
    if meta.get("supersedes"):
        lines.append(f"supersedes {printable(str(meta['supersedes']))}")
    superseded_by = (meta.get("final") or {}).get("superseded_by")
    if superseded_by:
        lines.append(f"superseded by {printable(str(superseded_by))}")
    return lines


def _work_lines(doc: dict[str, Any]) -> list[str]:
    """What the job asks (its paths and instruction) and what happened to it (events, attempts)."""
    return [
        "paths    " + ", ".join(f"{p}{' (create)' if v is None else ''}" for p, v in doc["job"]["inputs"].items()),
        "instruction:",
        *(f"    {printable(line, keep=chr(9))}" for line in doc["job"]["instruction"].splitlines()),
        "events:",
        *(f"    {e['commit'][:12]} {e['event']:<10} -> {e['state']} (epoch {e['epoch']})" for e in doc["events"]),
        *(
            printable(f"attempt {a.get('n')}: {a.get('state')} worker={a.get('worker')} epoch={a.get('epoch')}")
            for a in doc["attempt_records"]
        ),
    ]


def _outcome_lines(doc: dict[str, Any]) -> list[str]:
    """How it ended (`_answers`): receipt, result, model use, signer and where it landed."""
    result, signer, landed = doc.get("ended"), doc.get("signer"), doc.get("landed")
    lines = _receipt_lines(doc, result)
    lines += _model_lines(result or {}, signer or {})
    if signer:
        lines += _signer_lines(signer, result or {})
    if landed:
        lines.append(_landed_line(landed))
    return lines


def _receipt_lines(doc: dict[str, Any], result: dict[str, Any] | None) -> list[str]:
    """Whether a receipt is there (with its outputs), and the result it states."""
    lines = []
    if doc["receipt"]:
        lines.append(f"receipt  present; outputs: {', '.join(doc['outputs']) or '(none)'}")
    if result:
        reason = f": {result['reason']}" if result.get("reason") else ""
        lines.append(printable(f"result   {result.get('status')}{reason}"))
    return lines


def _landed_line(landed: dict[str, Any]) -> str:
    """The commit an applied job became, what it merged onto, and whether this clone has it."""
    onto = f", merged onto {landed['merged_onto'][:12]}" if landed.get("merged_onto") else ""
    where = "" if landed.get("here") else " (not in this clone: fetch that branch)"
    return printable(f"applied  as {landed['commit'][:12]} on {landed['branch']}{onto}{where}")


def _model_lines(result: dict[str, Any], signer: dict[str, Any]) -> list[str]:
    """The gateway's totals as the receipt states them, flagged when its signature did not verify."""
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return []
    budget = result.get("budget")
    spent = f"; budget {budget.get('exceeded')} = {budget.get('limit')} reached" if isinstance(budget, dict) else ""
    unverified = "" if signer.get("verified") else " (receipt NOT VERIFIED)"
    return [printable(f"model    {usage_text(usage)}{spent}{unverified}")]


def _signer_lines(signer: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """Who signed the receipt, and the worker id it asserts when that is not the signer's name."""
    if signer["verified"]:
        lines = [printable(f"signed   by {signer['name']} ({signer['keyid']})")]
    else:
        lines = [printable(f"signed   NOT VERIFIED: {signer.get('why')}")]
    worker = result.get("worker_id")
    if worker and worker != signer.get("name"):
        lines.append(printable(f"worker   id {worker} (self-asserted, not verified)"))
    return lines
