"""Shared setup for the benches: a throwaway repository with a trusted worker key."""

from __future__ import annotations

import os
import subprocess
import tempfile


def make_repo(files: int = 20) -> str:
    tmp = tempfile.mkdtemp(prefix="genjob-bench-")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
    }
    os.environ.update(
        {k: env[k] for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")}
    )
    subprocess.run(["git", "init", "-q", "-b", "main", tmp], check=True)
    for i in range(files):
        with open(os.path.join(tmp, f"f{i}.py"), "w") as fh:
            fh.write(f"x = {i}\n")
    subprocess.run(["git", "-C", tmp, "add", "-A"], check=True)
    subprocess.run(["git", "-C", tmp, "commit", "-qm", "i"], check=True)
    return tmp


def trusted_key(repo: str) -> str:
    """A trusted worker key, and a planner key the repository's git config names (so `submit`
    signs with it and nothing is written under the user's own config); returns the worker's."""
    from git_genjob.documents.keys import ROLES, generate, trust_line, write_key_files
    from git_genjob.planner.initrepo import init
    from git_genjob.storage.store import Store

    init(Store.open(repo), planner=False)
    key = generate("bench")
    path = os.path.join(repo, ".git", "bench-keys", "bench")  # removed with the repository
    write_key_files(key, path)
    planner = generate("bench-planner")
    write_key_files(planner, path + "-planner")
    subprocess.run(["git", "-C", repo, "config", "genjob.plannerKey", path + "-planner"], check=True)
    with open(os.path.join(repo, ".genjob", "allowed_signers"), "a") as fh:
        fh.write(trust_line("bench", key.public, None) + "\n")
        fh.write(trust_line("bench-planner", planner.public, None, namespaces=ROLES["planner"]) + "\n")
    subprocess.run(["git", "-C", repo, "add", ".genjob"], check=True)
    subprocess.run(["git", "-C", repo, "commit", "-qm", "trust"], check=True)
    return path
