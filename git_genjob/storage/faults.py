"""Named crash points: inert unless GENJOB_FAULT names one, then the process SIGKILLs itself there.

They let the fault-injection tests kill each multi-step write at every persistence step (see
docs/reliability.md). Each name marks the moment right after a durable step:

  ref-locked            the first ref transaction of the command holds its locks, nothing written
  after-claim           the claim event is durable, `sending` is not yet written
  after-sending         `sending` is durable, the generator has not started
  after-generate        the generator finished, the receipt is not yet stored
  after-commit          apply moved the branch, index/work tree not yet updated
  mid-checkout          apply wrote the index entries, the work tree not yet
  after-worktree        index and work tree updated, no note yet
  after-note            the note is written, the archive is not
  archive-written       the archive ref holds the job, its live ref is not yet deleted
  replay-recorded       the replay event is committed, its ref not yet moved
  after-push            a remote write was acknowledged, the local ref not yet moved (push: the
                        remote holds it, the report not yet made)

`NAME@N` fires on the N-th time the process passes NAME (`ref-locked@3`: inside the third ref
transaction), so a test can kill a command at each of its persistence steps in turn.
`GENJOB_FAULT_SIGNAL=INT` (or TERM, HUP) sends that signal instead of SIGKILL: a user stopping
the command at that very step (tests/contract/test_interrupts.py).
"""

from __future__ import annotations

import os
import signal

_passed: dict[str, int] = {}


def crash_point(name: str) -> None:
    want = os.environ.get("GENJOB_FAULT")
    if not want:
        return
    point, _, nth = want.partition("@")
    if point != name:
        return
    _passed[name] = _passed.get(name, 0) + 1
    if _passed[name] == (int(nth) if nth.isdigit() else 1):
        sig = os.environ.get("GENJOB_FAULT_SIGNAL", "KILL")
        os.kill(os.getpid(), getattr(signal, f"SIG{sig}", signal.SIGKILL))
