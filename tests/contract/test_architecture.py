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


def _arrows() -> dict[str, set[str]]:
    """Every first-party import as an arrow between modules (`a.b` for a/b.py and a/b/__init__.py):
    module level, inside functions and under TYPE_CHECKING alike; `from pkg import sub` points at
    the submodule, `from pkg import name` at the package."""
    names = {(m[: -len(".__init__")] if m.endswith(".__init__") else m) for m, _ in _modules()}
    names = {("git_genjob." + m if m != "__init__" else "git_genjob") for m in names}

    def known(name: str) -> str | None:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name or None

    arrows: dict[str, set[str]] = {}
    for rel, path in _modules():
        module = "git_genjob" if rel == "__init__" else "git_genjob." + rel.removesuffix(".__init__")
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        out = arrows.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text())):
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
                found = known(target) if target.startswith("git_genjob") else None
                if found is not None and found != module:
                    out.add(found)
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
