"""A stopped attempt (SPEC §12.4): on SIGINT, SIGTERM or SIGHUP the worker ends the attempt
itself before the interrupt goes on, so nothing waits for the lease to lapse."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import NoReturn

from git_genjob.documents.errors import GenjobError
from git_genjob.documents.states import JobState
from git_genjob.planner.ledger import Lease, stop_attempt
from git_genjob.storage.publish import Publisher


def end_stopped(pub: Publisher, lease: Lease, stop: KeyboardInterrupt) -> NoReturn:
    """End the attempt a stop signal interrupted, then let the interrupt go on, carrying what
    became of the job (the cli says it as the interrupt's last word)."""
    signal_name = str(stop.args[0]) if stop.args else "SIGINT"
    said = _stopped(pub, lease, signal_name)
    if said is None:
        raise stop
    raise KeyboardInterrupt(signal_name, said) from None


def _stopped(pub: Publisher, lease: Lease, signal_name: str) -> str | None:
    """End a stopped attempt (ledger.stop_attempt), with further stop signals held off while it
    is written, and say what became of the job; an attempt that already ended (a receipt) is
    left as it is (None)."""
    if lease.record.state not in (JobState.CLAIMED, JobState.SENDING):
        return None
    key = lease.record.key
    with _signals_held():
        try:
            state = stop_attempt(pub, lease, signal_name)
            pub.flush()
        except GenjobError as exc:  # fenced, or the remote is gone: recover decides once the lease lapses
            return f"stopped {key}: its attempt could not be ended ({exc.message}); git genjob recover will"
    if state == JobState.QUEUED:
        return f"stopped {key}: its claim was released, the job is queued again"
    return (
        f"stopped {key}: unknown, its generator was stopped and calls may have been sent; its owner decides "
        f"now: git genjob retry {key} or git genjob drop {key} --why TEXT"
    )


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Another Ctrl-C while the stopped attempt's end is written does not cut the write short."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in names}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
