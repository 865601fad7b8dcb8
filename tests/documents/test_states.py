"""The job state machine (issue 12): every event write is checked against one table."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_genjob.documents.errors import Conflict
from git_genjob.documents.states import TRANSITIONS, AttemptState, Event, JobState, transition
from git_genjob.planner.ledger import claim, end_attempt, record_sending, store_receipt
from git_genjob.storage.publish import publisher
from git_genjob.storage.records import load_live
from git_genjob.storage.store import Store
from tests.helpers.common import refs, setup_worker, submit_key


def test_the_table_is_spec_4() -> None:
    moves = {(s.value, e.value): [t.value] for (s, e), t in TRANSITIONS.items()}
    assert moves == {
        ("queued", "claimed"): ["claimed"],
        ("claimed", "sending"): ["sending"],
        ("claimed", "renewed"): ["claimed"],
        ("sending", "renewed"): ["sending"],
        ("claimed", "receipt"): ["done"],
        ("sending", "receipt"): ["done"],
        ("sending", "failed"): ["queued"],
        ("sending", "unknown"): ["unknown"],
        ("claimed", "recovered"): ["queued"],
        ("sending", "recovered"): ["unknown"],
        ("unknown", "retried"): ["queued"],
        ("done", "retried"): ["queued"],
        ("queued", "retried"): ["queued"],  # SPEC §11: the owner signs over a requeue nobody trusted signed
        ("claimed", "stopped"): ["queued"],  # SPEC §12.4: a stopped worker releases a claim it had not started
        ("sending", "stopped"): ["unknown"],  # and holds a send it stopped for the owner
    }
    assert transition("sending", "recovered") is JobState.UNKNOWN
    for state in JobState:
        for event in Event:
            if (state, event) in TRANSITIONS:
                assert transition(state, event) is TRANSITIONS[state, event]
            else:
                with pytest.raises(Conflict, match=f"cannot take event {event}"):
                    transition(state, event)


def test_a_write_off_the_machine_is_refused_before_anything_moves(repo: Path) -> None:
    """An out-of-order lifecycle call (a stale lease's late `sending`) writes nothing."""
    setup_worker(repo)
    k = submit_key(repo, "-m", "x", "src/user.py")
    store = Store.open(str(repo))
    pub = publisher(store)
    record = load_live(store, k)
    assert record is not None
    lease = claim(pub, record, "w1", 60)
    record_sending(pub, lease)
    end_attempt(pub, lease, AttemptState.UNKNOWN, "timed out")  # sending -> unknown
    before = refs(repo)
    with pytest.raises(Conflict, match="cannot take event receipt"):
        store_receipt(pub, lease, b"{}", {}, [])  # unknown -> done is no move of the machine
    assert refs(repo) == before
