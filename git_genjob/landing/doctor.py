"""`git genjob doctor`: what this machine and clone can do, one check at a time, each with a fix
(SPEC §12.4).

Every check returns a `Check` (ok, warn, fail or skip, what was found, and the fix), never
prints; the cli renders them and exits 1 when any failed. A check that cannot run here (no
remote, no gateway configured) says `skip` with why, never a pass it did not earn. The
refusals these checks explain end their hint with `git genjob doctor`.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from git_genjob.documents.config import read_config
from git_genjob.documents.errors import GenjobError
from git_genjob.documents.keys import default_key_path, read_signing_key
from git_genjob.landing.hooks import hook_states
from git_genjob.planner.trust import PLANNER_KEY_CONFIG, planner_key_path, worker_trust, worker_trust_missing
from git_genjob.storage.layout import NOTES_REF, RECEIPTS_REF
from git_genjob.storage.remote import git
from git_genjob.storage.store import Store
from git_genjob.worker.gateway.dialects import parse_gateway
from git_genjob.worker.generators.sandbox.choose import REFUSAL_FIX, bwrap_problem, choose
from git_genjob.worker.generators.sandbox.landlock import landlock_abi, userns_works
from git_genjob.worker.generators.sandbox.options import SandboxOptions


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": str(self.status), "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True)
class Report:
    checks: list[Check]

    @property
    def failed(self) -> bool:
        return any(c.status == Status.FAIL for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": not self.failed, "checks": [c.to_json() for c in self.checks]}

    def lines(self) -> list[str]:
        """One line per check, the fix under a warning or a failure."""
        width = max((len(c.name) for c in self.checks), default=0)
        out = []
        for c in self.checks:
            out.append(f"{c.status:<4} {c.name:<{width}}  {c.detail}")
            if c.fix and c.status in (Status.WARN, Status.FAIL):
                out.append(f"{'':<4} {'':<{width}}  fix: {c.fix}")
        return out


APPARMOR_USERNS = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
BWRAP_PROFILE_FIX = (
    "give bwrap an AppArmor profile that allows userns (Ubuntu 24.04: /etc/apparmor.d/bwrap with "
    "'profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }', then systemctl reload apparmor), "
    "or sysctl kernel.apparmor_restrict_unprivileged_userns=0"
)


def doctor(store: Store) -> Report:
    """Every check, in the order a user would fix them."""
    checks: list[Check] = []
    for probe in (_sandbox, _keys, _trust_store, _notes, _hooks, _refspecs, _gateway):
        checks += probe(store)
    return Report(checks)


# -- the sandbox (SPEC §11) --------------------------------------------------------------------


def _run(argv: list[str]) -> subprocess.CompletedProcess[bytes] | str:
    try:
        return subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)


def _sandbox(store: Store) -> list[Check]:
    root = os.geteuid() == 0
    checks = [_bwrap_check(), _userns_check(root)]
    checks.append(_apparmor(root, checks[0].status == Status.OK))
    return [*checks, _landlock_check(), _mechanism_check()]


def _bwrap_check() -> Check:
    """bubblewrap installed, able to run, and with the namespaces a generator gets."""
    exe = shutil.which("bwrap")
    if exe is None:
        return Check("sandbox.bwrap", Status.WARN, "bubblewrap is not installed", REFUSAL_FIX)
    proc = _run([exe, "--ro-bind", "/", "/", "true"])
    if isinstance(proc, str) or proc.returncode != 0:
        said = proc if isinstance(proc, str) else proc.stderr.decode("utf-8", "replace").strip()[-200:]
        return Check("sandbox.bwrap", Status.WARN, f"{exe} is installed but cannot run: {said}", BWRAP_PROFILE_FIX)
    why = bwrap_problem()  # with the namespaces a generator gets
    if why is None:
        return Check("sandbox.bwrap", Status.OK, f"{exe} works (bwrap --ro-bind / / true, and its namespaces)")
    return Check(
        "sandbox.bwrap",
        Status.WARN,
        f"{exe} runs, but not with a generator's namespaces: {why}",
        BWRAP_PROFILE_FIX,
    )


def _userns_check(root: bool) -> Check:
    if root:
        return Check("sandbox.userns", Status.OK, "running as root: namespaces need no user namespace")
    if userns_works():
        return Check("sandbox.userns", Status.OK, "this user may create user, PID and network namespaces")
    return Check(
        "sandbox.userns",
        Status.WARN,
        "this user may not create user namespaces (bubblewrap needs them; Landlock does not)",
        "sysctl user.max_user_namespaces=15000 (or kernel.unprivileged_userns_clone=1 on Debian)",
    )


def _landlock_check() -> Check:
    abi = landlock_abi()
    if abi < 1:
        return Check(
            "sandbox.landlock",
            Status.WARN,
            "Landlock is not available",
            "Linux 5.13 or later, with landlock in lsm=",
        )
    net = "denies TCP itself" if abi >= 4 else "cannot deny the network without a namespace (ABI 4, Linux 6.7, can)"
    return Check("sandbox.landlock", Status.OK, f"Landlock ABI {abi} ({net})")


def _mechanism_check() -> Check:
    """The confinement exec generators get here, or why they get none."""
    try:
        mechanism = choose(SandboxOptions())
    except GenjobError as exc:
        return Check("sandbox", Status.FAIL, exc.message, exc.hint or "")
    return Check("sandbox", Status.OK, f"exec generators run under {mechanism}")


def _apparmor(root: bool, bwrap_ok: bool) -> Check:
    try:
        with open(APPARMOR_USERNS, encoding="ascii") as fh:
            value = fh.read().strip()
    except OSError:
        return Check("sandbox.apparmor", Status.SKIP, "no AppArmor restriction of user namespaces on this kernel")
    if value != "1":
        return Check(
            "sandbox.apparmor", Status.OK, f"{APPARMOR_USERNS} = {value}: unprivileged user namespaces allowed"
        )
    if root or bwrap_ok:
        return Check(
            "sandbox.apparmor",
            Status.OK,
            "user namespaces are restricted (Ubuntu 24.04), and bwrap may create them here",
        )
    return Check(
        "sandbox.apparmor",
        Status.WARN,
        "user namespaces are restricted by AppArmor (Ubuntu 24.04's default), so bwrap cannot make its sandbox",
        BWRAP_PROFILE_FIX,
    )


# -- keys and the trust store (SPEC §6, §11) -----------------------------------------------------


def _trust(store: Store) -> Any:
    try:
        return worker_trust(store)
    except GenjobError:
        return None


def _trusted_for(trust: Any, public: bytes, namespace: str) -> bool:
    return trust is not None and any(
        k.public == public and k.namespaces and namespace in k.namespaces for k in trust.signers
    )


def _keys(store: Store) -> list[Check]:
    checks = []
    trust = _trust(store)
    path, configured = planner_key_path(store)
    if not os.path.exists(path):
        status = Status.FAIL if configured else Status.WARN
        where = (
            f"git config {PLANNER_KEY_CONFIG} names {path}, which does not exist"
            if configured
            else f"no planner key ({path})"
        )
        checks.append(Check("keys.planner", status, f"{where}: submit refuses", "git genjob keygen --planner"))
    else:
        try:
            key = read_signing_key(path)
        except GenjobError as exc:
            checks.append(Check("keys.planner", Status.FAIL, f"{path}: {exc.message}", exc.hint or ""))
        else:
            if _trusted_for(trust, key.public, "genjob-job"):
                checks.append(Check("keys.planner", Status.OK, f"{path} ({key.keyid}), trusted to plan"))
            else:
                checks.append(
                    Check(
                        "keys.planner",
                        Status.WARN,
                        f"{path} ({key.keyid}) is not trusted to plan in .genjob/allowed_signers: no worker claims "
                        "its jobs",
                        "git genjob keygen --planner (trusts it), then commit .genjob/allowed_signers",
                    )
                )
    checks += _worker_keys(store, trust, os.path.dirname(default_key_path("planner")), read_signing_key)
    return checks


def _worker_keys(store: Store, trust: Any, keys_dir: str, read: Callable[[str], Any]) -> list[Check]:
    paths = _worker_key_paths(store, keys_dir)
    if not paths:
        return [
            Check("keys.worker", Status.SKIP, "no worker key on this machine (a worker makes one: git genjob keygen)")
        ]
    return [_worker_key_check(trust, path, read) for path in dict.fromkeys(paths)]


def _worker_key_paths(store: Store, keys_dir: str) -> list[str]:
    """genjob.signingKey, then each key in `keys_dir` but the planner's (may repeat)."""
    paths = []
    configured = store.config_get("genjob.signingKey")
    if configured:
        paths.append(os.path.expanduser(configured))
    try:
        names = sorted(os.listdir(keys_dir))
    except OSError:
        names = []
    return paths + [os.path.join(keys_dir, n) for n in names if n != "planner" and not n.endswith(".pub")]


def _worker_key_check(trust: Any, path: str, read: Callable[[str], Any]) -> Check:
    """One worker key: readable, and trusted for receipts."""
    try:
        key = read(path)
    except GenjobError as exc:
        return Check("keys.worker", Status.FAIL, f"{path}: {exc.message}", exc.hint or "")
    if _trusted_for(trust, key.public, "genjob-receipt"):
        return Check("keys.worker", Status.OK, f"{path} ({key.keyid}), trusted for receipts")
    name = os.path.basename(path)
    return Check(
        "keys.worker",
        Status.WARN,
        f"{path} ({key.keyid}) is not trusted for receipts: apply refuses what it signs",
        f"git genjob trust add {name} {path}.pub, then commit .genjob/",
    )


def _trust_store(store: Store) -> list[Check]:
    if worker_trust_missing(store):
        return [
            Check(
                "trust-store",
                Status.FAIL,
                ".genjob/allowed_signers is missing from this checkout (not in the work tree, not on HEAD)",
                "git pull (or check out the branch that holds .genjob/), or git genjob init in a new project; a "
                "worker can be given one: --allowed-signers FILE or git config genjob.allowedSigners FILE",
            )
        ]
    trust = _trust(store)
    if trust is None or not trust.signers:
        return [
            Check(
                "trust-store",
                Status.FAIL,
                ".genjob/allowed_signers trusts nobody",
                "git genjob init, or git genjob trust add NAME KEY.pub",
            )
        ]
    return [_trusted_roles(trust)]


def _trusted_roles(trust: Any) -> Check:
    """A trust store that trusts someone: how many keys may plan and sign receipts, and its skipped lines."""
    roles = {
        ns: sum(1 for k in trust.signers if k.namespaces and ns in k.namespaces)
        for ns in ("genjob-job", "genjob-receipt")
    }
    detail = f"{len(trust.signers)} keys: {roles['genjob-job']} may plan, {roles['genjob-receipt']} may sign receipts"
    if trust.problems:
        return Check(
            "trust-store", Status.WARN, f"{detail}; lines skipped: {'; '.join(trust.problems)}", "fix those lines"
        )
    if not roles["genjob-job"] or not roles["genjob-receipt"]:
        return Check(
            "trust-store", Status.WARN, detail, "git genjob keygen --planner; git genjob trust add NAME KEY.pub"
        )
    return Check("trust-store", Status.OK, detail)


# -- notes, hooks, remotes, the gateway ----------------------------------------------------------


def _git(store: Store, *args: str) -> str:
    proc = git(store, *args, check=False)
    return proc.stdout if proc.returncode == 0 else ""


def _notes(store: Store) -> list[Check]:
    if store.head_commit() is None:
        return [Check("notes", Status.SKIP, "no commit checked out")]
    genjob = _git(store, "log", "-1", "--format=%h", "--grep=^Genjob-Key:", "HEAD").strip()
    if not genjob:
        return [Check("notes", Status.OK, "no genjob commit in HEAD's history, so no notes to fetch")]
    if store.ref_target(NOTES_REF) is None:
        return [
            Check(
                "notes",
                Status.FAIL,
                f"HEAD's history holds genjob commits ({genjob}, …) but {NOTES_REF} is absent: log and audit "
                "cannot prove them",
                "git genjob fetch",
            )
        ]
    return [Check("notes", Status.OK, f"{NOTES_REF} is here for HEAD's genjob commits")]


def _hooks(store: Store) -> list[Check]:
    states = hook_states(store)
    if all(s == "missing" for s in states.values()):
        return [Check("hooks", Status.SKIP, "no genjob hook installed (optional: git genjob init --hooks)")]
    checks = []
    for name, state in states.items():
        if state == "current":
            checks.append(Check(f"hooks.{name}", Status.OK, "installed, for this git-genjob"))
        elif state == "stale":
            checks.append(
                Check(
                    f"hooks.{name}",
                    Status.FAIL,
                    "genjob's, but written for another install (interpreter or package)",
                    "git genjob init --hooks",
                )
            )
        elif state == "foreign":
            checks.append(
                Check(
                    f"hooks.{name}",
                    Status.WARN,
                    "a hook that is not genjob's",
                    "git genjob init --hooks (keeps yours, chained)",
                )
            )
        else:
            checks.append(
                Check(f"hooks.{name}", Status.WARN, "not installed, while the others are", "git genjob init --hooks")
            )
    return checks


def fetches_notes_directly(refspec: str) -> bool:
    """Whether a fetch refspec takes genjob's notes refs from the remote on a plain `git fetch`
    (SPEC §12.2: they come in only through `git genjob fetch`, which checks each note first)."""
    src = refspec.lstrip("+").partition(":")[0]
    return any(fnmatch.fnmatchcase(ref, src) for ref in (NOTES_REF, RECEIPTS_REF))


def _refspecs(store: Store) -> list[Check]:
    remotes = _git(store, "remote").split()
    if not remotes:
        return [Check("remotes", Status.SKIP, "no remote")]
    checks = []
    for remote in remotes:
        direct = [r for r in store.config_values(f"remote.{remote}.fetch") if fetches_notes_directly(r)]
        if direct:
            checks.append(
                Check(
                    f"remote.{remote}",
                    Status.WARN,
                    f"fetch refspec {', '.join(direct)} takes genjob's notes on a plain git fetch, unchecked",
                    f"git genjob init (its refspecs leave the notes to git genjob fetch {remote}, which checks each)",
                )
            )
        else:
            checks.append(Check(f"remote.{remote}", Status.OK, "no fetch refspec takes genjob's notes unchecked"))
    return checks


GATEWAY_FIX = "add [gateway.NAME] with upstream = to .genjob/config.toml, or give workers --gateway NAME=URL"


def _gateway(store: Store) -> list[Check]:
    """Each upstream of the committed `[gateway.NAME]` tables (SPEC §12.1): its key variable set in
    this environment (the worker reads it there), and the upstream answering `GET /v1/models` with
    that key within 5 s. The key goes only where a worker would send it; nothing is printed of it."""
    try:
        named = read_config(store).gateways
    except GenjobError as exc:
        return [Check("gateway", Status.FAIL, exc.message, exc.hint or "fix .genjob/config.toml")]
    if not named:
        return [Check("gateway", Status.SKIP, "no gateway configured in .genjob/config.toml", GATEWAY_FIX)]
    checks = []
    for name, url, dialect, key_env in named:
        label = f"gateway.{name}"
        try:
            up = parse_gateway(f"{name}={url}", dialect, key_env)
        except GenjobError as exc:
            checks.append(Check(label, Status.FAIL, exc.message, exc.hint or "fix .genjob/config.toml"))
            continue
        key = os.environ.get(up.key_env, "")
        checks.append(_reach(label, up, key))
        if not key:
            checks.append(
                Check(
                    f"{label}.key",
                    Status.WARN,
                    f"{up.key_env} is not set here: a worker on this machine would send {up.url} no key",
                    f"export {up.key_env} in the worker's environment (never --pass-env it: the gateway adds it)",
                )
            )
    return checks


def _reach(label: str, up: Any, key: str) -> Check:
    import httpx

    from git_genjob.worker.gateway.upstream import is_loopback  # httpx, only when a gateway is configured

    try:
        with httpx.Client(timeout=5.0, trust_env=not is_loopback(up.url), follow_redirects=False) as client:
            resp = client.get(f"{up.url}/v1/models", headers=up.key_headers(key) if key else {})
    except httpx.HTTPError as exc:
        return Check(label, Status.FAIL, f"{up.url} ({up.dialect}) is unreachable: {exc}",
                     "check the URL, the proxy (HTTPS_PROXY) and the network of the worker's machine")  # fmt: skip
    if resp.status_code in (401, 403) and key:
        return Check(label, Status.FAIL, f"{up.url} refused the key in {up.key_env} ({resp.status_code})",
                     f"set {up.key_env} to a key this upstream accepts")  # fmt: skip
    return Check(label, Status.OK, f"{up.url} ({up.dialect}) answers (GET /v1/models: {resp.status_code})")
