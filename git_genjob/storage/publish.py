"""Where a job's events are published: one ref-writer interface, two implementations.

`LocalRefs` writes this repository's refs by compare-and-swap. `LeasedRemote` publishes to a
remote first, each ref pushed with a lease on the value last fetched from it, and only then
moves the local refs, so the remote (shared by every worker) is the one place a race is
decided. The ledger only sees `Publisher`: it never asks which one it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pygit2

from git_genjob.documents.errors import Conflict
from git_genjob.storage.archive import Archive
from git_genjob.storage.faults import crash_point
from git_genjob.storage.layout import ARCHIVE_REF, job_ref
from git_genjob.storage.remote import SyncReport, fetch_raw, push_each, push_leases, reconcile
from git_genjob.storage.store import RefUpdate, Store

Settled = Callable[[str | None], None]  # told None once a held event is published, else why it was refused


@dataclass
class _Riding:
    """An event held to go out with this publisher's next push (see Publisher.advance)."""

    update: RefUpdate
    message: str
    settled: Settled


class Publisher:
    """The ref-writer interface (see the module docstring)."""

    remote: str | None = None

    def __init__(self, store: Store):
        self.store = store

    def refresh(self) -> None:
        """Bring the local view up to date with where events are published."""

    def shares(self, name: str, value: pygit2.Oid | None) -> bool:
        """Whether the place events are published holds `value` at `name` too (a worker never
        claims from a view the remote does not share)."""
        return True

    def twin(self, store: Store) -> Publisher:
        """The same publisher over another handle of the repository (for another thread)."""
        return LocalRefs(store)

    def adopt(self, twin: Publisher) -> None:
        """Take over what a twin learned about the published refs."""

    def move(self, updates: list[RefUpdate], message: str) -> None:
        """Move refs by compare-and-swap, one at a time in the order given: every prefix of the
        steps is a state the next command recovers from (an archive before a deletion)."""
        raise NotImplementedError

    def advance(
        self,
        name: str,
        expected: pygit2.Oid | None,
        build: Callable[[], pygit2.Oid],
        message: str,
        wait: bool = True,
        defer: bool = False,
        ride: Settled | None = None,
    ) -> pygit2.Oid:
        """Move `name` from `expected` to the commit `build()` writes (an event), and return it.
        With wait=False (a claim) a lock another worker holds is a conflict at once, where the
        implementation can tell. With defer, a publisher that pays per publication (a remote)
        may hold the event back and publish it with the next event on `name`, in one push: the
        remote then decides both at once (a claim and its `sending`), and nothing before that
        push is shared or durable. With `ride` (a receipt, the last event of an attempt) such a
        publisher may hold the event until its next push of another ref, which carries it under
        its own lease, or until `flush()`; `ride(None)` once it is published, `ride(why)` if the
        remote refused it (fenced). Elsewhere the event is published now and `ride(None)` called."""
        new = self._move_built(name, expected, build, message, wait)
        if ride is not None:
            ride(None)
        return new

    def _move_built(
        self, name: str, expected: pygit2.Oid | None, build: Callable[[], pygit2.Oid], message: str, wait: bool
    ) -> pygit2.Oid:
        """Publish the event `build()` writes on `name` now (advance without holding it)."""
        new = build()
        self.move([RefUpdate(name, expected, new)], message)
        return new

    def flush(self) -> None:
        """Publish every event held to ride with a later push (see advance)."""

    def unpublished(self) -> list[str]:
        """The refs whose held events (see advance) are not published yet."""
        return []

    def archive(self, key: str, job_tip: pygit2.Oid, tree: pygit2.Oid, message: str, row: str) -> None:
        """Move a live job into refs/genjob/archive: the archive first, then the live ref."""
        new_tip = Archive(self.store).commit(key, job_tip, tree, message, row)
        self.move(
            [
                RefUpdate(ARCHIVE_REF, self.store.ref_target(ARCHIVE_REF), new_tip),
                RefUpdate(job_ref(key), job_tip, None),
            ],
            f"genjob: archive {key}",
        )


class LocalRefs(Publisher):
    """This repository's refs."""

    def move(self, updates: list[RefUpdate], message: str) -> None:
        for u in updates:
            self.store.update_refs([u], message=message)

    def _move_built(
        self, name: str, expected: pygit2.Oid | None, build: Callable[[], pygit2.Oid], message: str, wait: bool
    ) -> pygit2.Oid:
        # The ref is locked before the event's objects are written: a loser writes none.
        return self.store.update_ref_built(name, expected, build, message, wait)

    def archive(self, key: str, job_tip: pygit2.Oid, tree: pygit2.Oid, message: str, row: str) -> None:
        Archive(self.store).move(key, job_tip, tree, message, row)


class LeasedRemote(Publisher):
    """A remote through leased pushes, then the local refs."""

    def __init__(self, store: Store, remote: str):
        super().__init__(store)
        self.remote: str = remote
        self.remote_values: dict[str, pygit2.Oid] = {}
        self.held: dict[str, tuple[pygit2.Oid | None, pygit2.Oid]] = {}  # name -> (remote value, held event)
        self.riding: list[_Riding] = []  # events for the next push of another ref (receipts)

    def advance(
        self,
        name: str,
        expected: pygit2.Oid | None,
        build: Callable[[], pygit2.Oid],
        message: str,
        wait: bool = True,
        defer: bool = False,
        ride: Settled | None = None,
    ) -> pygit2.Oid:
        held = self.held.pop(name, None)
        base = expected
        if held is not None and held[1] == expected:
            base = held[0]  # the held event goes out under this one, with the lease it was built on
        new = build()
        if defer:
            self.held[name] = (base, new)
            return new
        if ride is not None and base == self.remote_values.get(name):
            self.riding.append(_Riding(RefUpdate(name, base, new), message, ride))
            return new
        self.move([RefUpdate(name, base, new)], message)
        if ride is not None:
            ride(None)
        return new

    def flush(self) -> None:
        if self.riding:
            self.move([], "")

    def unpublished(self) -> list[str]:
        return [r.update.name for r in self.riding]

    def refresh(self) -> None:
        self.remote_values = fetch_raw(self.store, self.remote)
        reconcile(self.store, self.remote_values, SyncReport())

    def shares(self, name: str, value: pygit2.Oid | None) -> bool:
        return self.remote_values.get(name) == value

    def twin(self, store: Store) -> Publisher:
        twin = LeasedRemote(store, self.remote)
        twin.remote_values = dict(self.remote_values)
        return twin  # nothing held: a twin (the lease renewer) starts after `sending` is out

    def adopt(self, twin: Publisher) -> None:
        if isinstance(twin, LeasedRemote):
            self.remote_values.update(twin.remote_values)

    def move(self, updates: list[RefUpdate], message: str) -> None:
        self._check_fetched(updates)
        riding = self._riders_for(updates)
        refused = self._push(riding, updates)
        lost = [u for u in updates if u.name in refused]
        for u in _published(riding, updates, refused):
            self._remember(u)
        crash_point("after-push")
        self._settle(riding, refused)
        if lost:
            raise Conflict(
                "the remote moved: " + ", ".join(u.name for u in lost),
                "another machine wrote first; git genjob fetch, then try again",
            )
        for u in updates:
            self._set_local(u, message)

    def _check_fetched(self, updates: list[RefUpdate]) -> None:
        """Conflict unless each update is leased on the value last fetched from the remote."""
        for u in updates:
            if u.expected != self.remote_values.get(u.name):
                raise Conflict(f"{u.name} has local events the remote lacks", "run git genjob push first")

    def _riders_for(self, updates: list[RefUpdate]) -> list[_Riding]:
        """The held events that go out in the same push as `updates`: none when these move
        together (--atomic) or touch a held ref; those are flushed first, on their own."""
        riding, self.riding = self.riding, []
        if riding and (len(updates) > 1 or any(r.update.name == u.name for r in riding for u in updates)):
            self.riding = riding
            self.flush()
            return []
        return riding

    def _push(self, riding: list[_Riding], updates: list[RefUpdate]) -> set[str]:
        """Push `updates` with the held events riding along (one push, not atomic: each ref
        decided by its own lease), else `updates` alone, leased; the names the remote refused."""
        if not riding:
            push_leases(self.store, self.remote, updates)
            return set()
        try:
            return push_each(self.store, self.remote, [r.update for r in riding] + updates)
        except BaseException:
            self.riding = riding + self.riding  # not decided: flush() tries them again
            raise

    def _remember(self, u: RefUpdate) -> None:
        """Record the value `u` leaves on the remote."""
        if u.new is None:
            self.remote_values.pop(u.name, None)
        else:
            self.remote_values[u.name] = u.new

    def _settle(self, riding: list[_Riding], refused: set[str]) -> None:
        """Move the held events the remote took locally, then tell each held event how it went."""
        # Locally one ref at a time, in the order given, whatever the local value: the remote decided.
        for r in riding:
            if r.update.name not in refused:
                self._set_local(r.update, r.message)
        for r in riding:
            r.settled(None if r.update.name not in refused else f"the remote moved: {r.update.name}")

    def _set_local(self, u: RefUpdate, message: str) -> None:
        self.store.update_refs([RefUpdate(u.name, self.store.ref_target(u.name), u.new)], message=message)


def _published(riding: list[_Riding], updates: list[RefUpdate], refused: set[str]) -> list[RefUpdate]:
    """What a push left on the remote: each held event it did not refuse, and `updates` when it
    refused none of them."""
    lost = any(u.name in refused for u in updates)
    return [r.update for r in riding if r.update.name not in refused] + [u for u in updates if not lost]


class OnePush(LeasedRemote):
    """Events of several refs that go out together or not at all (`resubmit --remote`: a new job
    and the old one's archive move). Each move is held, leased on the value fetched from the
    remote; `publish()` sends them all in one `git push --atomic` and only then moves the local
    refs, so a refused push leaves both sides as they were (the objects written are unreachable)."""

    def __init__(self, store: Store, remote: str):
        super().__init__(store, remote)
        self.staged: list[tuple[RefUpdate, str]] = []

    def move(self, updates: list[RefUpdate], message: str) -> None:
        for u in updates:
            if u.expected != self.remote_values.get(u.name):
                raise Conflict(
                    f"{u.name} has local events {self.remote} lacks", f"run git genjob push {self.remote} first"
                )
            self._remember(u)  # the next held move builds on what this one leaves
            self.staged.append((u, message))

    def carry(self, name: str) -> None:
        """Hold `name`'s local value too, where the remote lacks it (a job an earlier local run
        minted), so it goes out with the rest."""
        local = self.store.ref_target(name)
        if local is not None and local != self.remote_values.get(name):
            self.move([RefUpdate(name, self.remote_values.get(name), local)], f"genjob: publish {name}")

    def publish(self) -> None:
        """Push every held move in one atomic push, then move the local refs in the order given."""
        staged, self.staged = self.staged, []
        leases: dict[str, RefUpdate] = {}
        for u, _ in staged:  # one spec per ref: its first lease, its last value
            first = leases.get(u.name)
            leases[u.name] = RefUpdate(u.name, first.expected if first else u.expected, u.new)
        push_leases(self.store, self.remote, list(leases.values()))
        crash_point("after-push")
        for u, message in staged:
            self._set_local(u, message)


def publisher(store: Store, remote: str | None = None) -> Publisher:
    """The local refs, or `remote` through leased pushes."""
    return LocalRefs(store) if remote is None else LeasedRemote(store, remote)
