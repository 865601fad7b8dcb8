"""The reviewer's view of `git log --all` without the ledger (issue 32 item 10, docs/reviewing.md):
the documented `--exclude` patterns leave exactly the project's history, remote-tracking ledger
refs included, and the summary notes still show."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.common import git, repo_with_remote, run_genjob, setup_worker, submit_key, work

HIDE = ["--exclude=refs/genjob*", "--exclude=refs/notes/*", "--all"]  # as docs/reviewing.md writes it


def test_the_documented_exclude_hides_every_ledger_commit_and_keeps_the_project_s(tmp_path: Path) -> None:
    _, repo = repo_with_remote(tmp_path)
    key = setup_worker(repo)  # init names origin's genjob refs: they track under refs/genjob-remotes/origin/
    for n in range(2):
        k = submit_key(repo, "-m", f"Touch the readme {n}", "README.md")
        assert work(repo, key, f"echo {n} >> README.md", "--once").code == 0
        assert run_genjob("apply", k, cwd=repo).code == 0
    assert run_genjob("push", "origin", cwd=repo).code == 0
    git(repo, "push", "-q", "origin", "main")
    git(repo, "fetch", "-q", "origin")
    tracked = git(repo, "for-each-ref", "--format=%(refname)", "refs/genjob-remotes/origin/").split()
    assert tracked
    everything = git(repo, "log", "--all", "--format=%s").splitlines()
    assert any(s.startswith("genjob: claimed ") for s in everything) and any(s == "genjob: note" for s in everything)
    shown = git(repo, "log", *HIDE, "--format=%H").split()
    assert shown == git(repo, "log", "main", "origin/main", "--format=%H").split()  # the project's commits, all
    assert len(shown) == 4 and len(everything) > len(shown)  # initial, trust worker, the two applies
    # gitk passes an option it does not know, with all its arguments as given, to this git log
    gitk = git(repo, "log", "--no-color", "-z", "--pretty=raw", "--parents", "--boundary", *HIDE, "--")
    assert [c.split()[1] for c in gitk.split("\0") if c] == shown
    summaries = git(repo, "log", *HIDE, "--notes=genjob", "--format=%N")
    assert summaries.count("genjob ") >= 2, summaries  # the notes are still shown beside the applies
