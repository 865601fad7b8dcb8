"""`git genjob init`: the .genjob/ scaffold, notes display and remote refspecs."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from git_genjob.documents.config import TEMPLATE
from git_genjob.documents.errors import BadInput
from git_genjob.storage.layout import NOTES_REF, NOTES_REFS
from git_genjob.storage.remote import broad_refspec, fetch_refspecs
from git_genjob.storage.store import Store

SIGNERS_HEADER = """\
# git-genjob trust store (OpenSSH allowed_signers format). One line per trusted key; its
# namespaces say what it may sign: genjob-receipt and genjob-replay (a worker), genjob-job and
# genjob-review (a planner, who also reviews cached answers):
#   NAME namespaces="genjob-receipt,genjob-replay",valid-before="20270101" ssh-ed25519 AAAA...
# Add keys with: git genjob trust add NAME KEYFILE.pub [--as worker|planner|reviewer]
"""
REVOKED_HEADER = "# Revoked worker keys, one OpenSSH public key line each (git genjob trust revoke NAME).\n"


@dataclass
class InitReport:
    created: list[str] = field(default_factory=list)
    config: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    planner: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, list[str]]:
        return dict(self.__dict__)

    def lines(self) -> list[str]:
        """The human report."""
        out = [f"created {p}" for p in self.created] + [f"config  {c}" for c in self.config]
        out += [f"hook    {h}" for h in self.hooks] + [f"planner {p}" for p in self.planner]
        if not out:
            out.append("already initialized")
        return [*out, "next: git genjob keygen, git genjob trust add NAME KEY.pub, then commit .genjob/"]


DISPLAY_GLOB = NOTES_REF[:-1] + "[" + NOTES_REF[-1] + "]"  # refs/notes/genjo[b]


def init(store: Store, planner: bool = True) -> InitReport:
    """The scaffold; with `planner` also this user's planner key and its trust line (SPEC §11)."""
    report = InitReport()
    if store.workdir is None:
        raise BadInput("init needs a work tree (a bare repository has no .genjob/)", "run it in a clone")
    report.created = _scaffold(os.path.join(store.workdir, ".genjob"))
    if planner:
        from git_genjob.planner.trust import ensure_planner

        report.planner = ensure_planner(store)
    report.config = _notes_config(store) + _remote_config(store)
    return report


_SCAFFOLD = (("allowed_signers", SIGNERS_HEADER), ("revoked_keys", REVOKED_HEADER), ("config.toml", TEMPLATE))


def _scaffold(gdir: str) -> list[str]:
    """The .genjob/ files that do not exist yet, created with their templates; returns them."""
    os.makedirs(gdir, exist_ok=True)
    created = []
    for name, text in _SCAFFOLD:
        path = os.path.join(gdir, name)
        if not os.path.exists(path):
            with open(path, "x", encoding="utf-8") as fh:
                fh.write(text)
            created.append(f".genjob/{name}")
    return created


def _notes_config(store: Store) -> list[str]:
    """The notes settings: display the summary, keep both refs across rewrites, merge by lines."""
    done = []
    # A glob matching exactly refs/notes/genjob: git warns "notes ref ... is invalid" on every
    # `git show` while a plain displayRef names a ref that does not exist yet; a glob never does.
    if NOTES_REF in store.config_values("notes.displayRef"):
        store.config_delete("notes.displayRef", f"^{NOTES_REF}$")
    if store.config_add("notes.displayRef", DISPLAY_GLOB):
        done.append(f"notes.displayRef={DISPLAY_GLOB}")
    for ref in NOTES_REFS:  # the summary and the envelope (SPEC §11) both follow rebase and amend
        if store.config_add("notes.rewriteRef", ref):
            done.append(f"notes.rewriteRef={ref}")
    return done + _notes_merge_config(store)


def _notes_merge_config(store: Store) -> list[str]:
    """`git notes merge` of either ref merges lines, as git genjob fetch does."""
    done = []
    for ref in NOTES_REFS:
        name = f"notes.{ref[len('refs/notes/') :]}.mergeStrategy"
        if store.config_get(name) != "cat_sort_uniq":
            store.config_set(name, "cat_sort_uniq")
            done.append(f"{name}=cat_sort_uniq")
    return done


def _remote_config(store: Store) -> list[str]:
    """Each remote's fetch refspecs for the genjob refs, an earlier init's broad one removed."""
    done = []
    for remote in store.remote_names():
        old = broad_refspec(remote)  # an earlier init's: a stray remote ref could make it fail a fetch
        if old in store.config_values(f"remote.{remote}.fetch"):
            store.config_delete(f"remote.{remote}.fetch", "^" + re.escape(old) + "$")
            done.append(f"remote.{remote}.fetch: removed {old}")
        for spec in fetch_refspecs(remote):
            if store.config_add(f"remote.{remote}.fetch", spec):
                done.append(f"remote.{remote}.fetch={spec}")
    return done
