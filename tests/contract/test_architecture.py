"""The import directions of docs/architecture.md, checked on the source (issue 12)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.common import REPO_ROOT

PACKAGE = REPO_ROOT / "git_genjob"
# Each plane is one package; the four top-level modules are the process entry (cli plane).
PLANES = {
    "documents": "documents",
    "storage": "storage",
    "planner": "planner",
    "replay": "replay",
    "worker": "worker",
    "landing": "landing",
    "cli": "cli",
}
ENTRY = {"__init__", "__main__", "entry", "fasthelp"}
ALLOWED = {
    "documents": {"documents"},
    "storage": {"documents", "storage"},
    "planner": {"documents", "storage", "planner"},
    "replay": {"documents", "storage", "planner", "replay"},
    "worker": {"documents", "storage", "planner", "replay", "worker"},
    "landing": {"documents", "storage", "planner", "replay", "worker", "landing"},
    "cli": set(PLANES),
}


def _plane(module: str) -> str:
    """The plane of a module path relative to git_genjob ("storage.store", "entry")."""
    top = module.split(".")[0]
    if top in ENTRY:
        return "cli"
    return PLANES[top]


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) outside `if TYPE_CHECKING:` blocks."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            skip |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.module, [a.name for a in node.names], node.lineno))
    return out


def _modules() -> list[tuple[str, Path]]:
    return [(".".join(p.relative_to(PACKAGE).with_suffix("").parts), p) for p in sorted(PACKAGE.rglob("*.py"))]


def test_every_module_is_in_a_plane_package() -> None:
    """No flat module outside the entry points: a newcomer finds each SPEC section in one package."""
    stray = [m for m, _ in _modules() if "." not in m and m not in ENTRY]
    assert stray == []
    assert {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} == set(PLANES)


def test_each_plane_package_says_what_it_owns_and_may_import() -> None:
    for plane, package in PLANES.items():
        doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text())) or ""
        assert "Owns" in doc or plane == "cli", plane
        if plane != "cli":
            allowed = sorted(ALLOWED[plane] - {plane})
            assert "May import" in doc and all(a in doc for a in allowed), (plane, allowed)


def test_imports_only_go_down_the_planes() -> None:
    bad = []
    for module, path in _modules():
        here = _plane(module)
        for target, names, line in _imports(path):
            if target == "git_genjob":
                targets = [n for n in names if n != "__version__"]
            elif target.startswith("git_genjob."):
                targets = [target.removeprefix("git_genjob.")]
            else:
                continue
            for t in targets:
                if _plane(t) not in ALLOWED[here]:
                    bad.append(f"{module}:{line} ({here}) imports {t} ({_plane(t)})")
    assert bad == []


def test_click_pygit2_and_private_names_stay_where_they_belong() -> None:
    bad = []
    for module, path in _modules():
        plane = _plane(module)
        for target, names, line in _imports(path):
            top = target.split(".")[0]
            if top == "click" and plane != "cli":
                bad.append(f"{module}:{line} imports click")
            if top == "pygit2" and (plane == "documents" or module.startswith("worker.generators")):
                bad.append(f"{module}:{line} imports pygit2")
            inner = target.removeprefix("git_genjob.")
            # a generator sees the job, its scratch directory and the replay client, nothing of the repository;
            # an exec generator starts its attempt's gateway (worker.gateway, the plane of model calls, SPEC §12.1)
            ours = target != inner
            sees = ours and (
                inner.startswith(("worker.generators", "worker.gateway", "replay.web")) or _plane(inner) == "documents"
            )
            if module.startswith("worker.generators") and ours and not sees:
                bad.append(f"{module}:{line} imports {target}")
            if target.startswith("git_genjob"):
                private = [n for n in names if n.startswith("_") and not n.endswith("__")]
                bad += [f"{module}:{line} imports private {target}.{n}" for n in private]
    assert bad == []


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The rules are not vacuous: a documents module importing the store is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("from git_genjob.storage.store import Store\nfrom git_genjob.landing.apply import _x\n")
    found = _imports(bad)
    assert found == [("git_genjob.storage.store", ["Store"], 1), ("git_genjob.landing.apply", ["_x"], 2)]
    assert _plane("storage.store") not in ALLOWED["documents"]
    assert _plane("landing.apply") not in ALLOWED["worker"]  # a worker never applies


LIBGIT2_WRITES = {
    "create_blob",
    "create_blob_fromdisk",
    "create_blob_fromworkdir",
    "create_commit",
    "create_reference",
    "create_tag",
    "TreeBuilder",
    "write_tree",
    "set_multivar",
    "delete_multivar",
    "transaction",
}


def _libgit2_writes(path: Path) -> list[str]:
    """Calls of libgit2's object, ref and config writers, and `X.config[...] = …` assignments."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LIBGIT2_WRITES:
            found.append(f"{node.lineno}: {node.func.attr}")
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and t.value.attr == "config":
                    found.append(f"{node.lineno}: config[...] =")
    return found


def test_store_is_the_only_libgit2_writer() -> None:
    """Objects, refs and git config are written through Store's methods (one CAS, one fsync
    policy, one identity), never by another module on the raw repository."""
    bad = [f"{module}:{w}" for module, path in _modules() if module != "storage.store" for w in _libgit2_writes(path)]
    assert bad == []


def test_the_writer_check_sees_a_raw_write(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def f(store):\n    store.repo.create_commit(None)\n    store.repo.config['a.b'] = 'c'\n")
    assert sorted(_libgit2_writes(planted)) == ["2: create_commit", "3: config[...] ="]


def test_no_module_reaches_into_the_store_s_repository() -> None:
    """`Store._repo` is private: every other module goes through Store's methods."""
    bad = [
        f"{module}:{node.lineno}"
        for module, path in _modules()
        if module != "storage.store"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in ("_repo", "repo")
    ]
    assert bad == []


def _names() -> set[str]:
    """Every module as an import names it (`git_genjob.a.b` for a/b.py and a/b/__init__.py)."""
    names = {(m[: -len(".__init__")] if m.endswith(".__init__") else m) for m, _ in _modules()}
    return {("git_genjob." + m if m != "__init__" else "git_genjob") for m in names}


def _first_party(rel: str, path: Path, names: set[str], tree: ast.Module) -> tuple[str, list[tuple[ast.stmt, str]]]:
    """A module's name and each first-party import in it as (statement, module imported): module
    level, inside functions and under TYPE_CHECKING alike; `from pkg import sub` points at the
    submodule, `from pkg import name` at the package."""

    def known(name: str) -> str | None:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name or None

    module = "git_genjob" if rel == "__init__" else "git_genjob." + rel.removesuffix(".__init__")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[ast.stmt, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in names]
            targets = subs if len(subs) == len(node.names) else [base, *subs]
        else:
            continue
        for target in targets:
            hit = known(target) if target.startswith("git_genjob") else None
            if hit is not None and hit != module:
                found.append((node, hit))
    return module, found


def _arrows() -> dict[str, set[str]]:
    """Every first-party import as an arrow between modules (see `_first_party`)."""
    names = _names()
    arrows: dict[str, set[str]] = {}
    for rel, path in _modules():
        module, found = _first_party(rel, path, names, ast.parse(path.read_text()))
        arrows.setdefault(module, set()).update(target for _, target in found)
    return arrows


def _circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(arrows):
        if root in index:
            continue
        work = [(root, iter(sorted(arrows[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(arrows.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_package_has_no_import_circle() -> None:
    """Issue 36: no circle of imports, however an import is written (a function-level import
    that hides a circle counts); a new one names its modules."""
    assert _circles(_arrows()) == []


def test_the_circle_check_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_is_over_700_lines() -> None:
    """Issue 36: a module past 700 lines holds two jobs; split it by what each part is for."""
    assert [f"{m}: {_lines(p)} lines" for m, p in _modules() if _lines(p) > 700] == []


# Issue 36: each first-party import inside a function, outside the cli plane and the start-up
# modules, with its reason: (module, module imported) -> why it is not at the top. A reason is a
# fast path's import budget (tests/test_imports.py, the memo tests), a heavy dependency only some
# calls need, or work only one branch does; never a circle (test_the_package_has_no_import_circle
# counts these imports too). An import that can go to the top goes there, and leaves this list.
NO_NACL = "loads PyNaCl: only when a signature is judged, not for every command that reads it"
SLOW_MEMO = "the slow path's remember_*: the fast path in this module stays libgit2-free"
LATE_IMPORTS = {
    ("documents.errors", "documents.display"): "`re` (~10 ms) for a crash message only; hooks import errors",
    ("documents.job", "documents.keys"): NO_NACL + " (hooks read jobs without it)",
    ("documents.job", "documents.signing"): NO_NACL + " (hooks read jobs without it)",
    ("landing.doctor", "worker.gateway.upstream"): "httpx: only when a gateway is configured",
    ("landing.fast", "documents.display"): SLOW_MEMO + " (and re-free)",
    ("landing.fast", "landing.verify"): SLOW_MEMO,
    ("landing.fast", "planner.trust"): SLOW_MEMO,
    ("landing.fast", "storage.archive"): SLOW_MEMO,
    ("landing.hooks", "documents.job"): "dataclasses (~9 ms): only once a live job's paths are read",
    ("landing.hooks", "documents.keys"): "PyNaCl: only for a job not yet judged under this trust store",
    ("landing.hooks", "landing.hookcheck"): "libgit2: only once the hook's cheap look found something to check",
    ("planner.initrepo", "planner.trust"): "PyNaCl: only for init --planner",
    ("planner.rows", "documents.receipt"): NO_NACL + " (a receipt's status, shown only)",
    ("planner.statusfast", "documents.display"): SLOW_MEMO + " (and re-free)",
    ("planner.statusfast", "planner.rows"): SLOW_MEMO,
    ("planner.statusfast", "planner.trust"): SLOW_MEMO,
    ("planner.statusfast", "storage.archive"): SLOW_MEMO,
    ("replay.fast", "replay.prompt"): "`re`: only once the memo's stamp holds and the prompt is read",
    ("storage.records", "documents.keys"): NO_NACL,
    ("storage.records", "documents.signing"): NO_NACL,
    ("storage.records", "storage.truststore"): NO_NACL,
    ("storage.remote", "storage.truststore"): NO_NACL + " (a rival chain's)",
    ("worker.generators", "worker.generators.http"): "libgit2, PyNaCl and click: only for an http: generator",
    ("worker.generators", "worker.generators.openai"): "libgit2, PyNaCl and click: only for an openai: generator",
    ("worker.generators.exec", "worker.gateway.server"): "libgit2 and PyNaCl: only an attempt with a gateway",
}


def _late_imports() -> set[tuple[str, str]]:
    """(module, module imported) for each first-party import inside a function, outside the cli
    plane and the start-up modules, as `LATE_IMPORTS` names them (relative to git_genjob)."""
    names = _names()
    late: set[tuple[str, str]] = set()
    for rel, path in _modules():
        if _plane(rel) == "cli":
            continue
        tree = ast.parse(path.read_text())
        inside = {
            id(n)
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for n in ast.walk(fn)
        }
        module, found = _first_party(rel, path, names, tree)
        late |= {(module, target) for node, target in found if id(node) in inside}
    return {(m.removeprefix("git_genjob."), t.removeprefix("git_genjob.")) for m, t in late}


def test_each_import_inside_a_function_is_listed_with_its_reason() -> None:
    """Issue 36: at most 40, each with a reason; a new one is added here or hoisted, and one that
    went to the top (or away) leaves the list."""
    late = _late_imports()
    assert sorted(late - set(LATE_IMPORTS)) == [], "new: hoist it, or list it with its reason"
    assert sorted(set(LATE_IMPORTS) - late) == [], "stale: no longer inside a function"
    assert all(reason.strip() for reason in LATE_IMPORTS.values())
    assert len(LATE_IMPORTS) <= 40
