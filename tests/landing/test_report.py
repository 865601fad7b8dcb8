"""`audit --format md` / `log --format md`: the report renders as one table a reviewer reads, and
no instruction, trailer or receipt text becomes markup (issue 25).

The Markdown is read back with markdown-it-py, a CommonMark parser with GFM tables, raw HTML on
(so injected HTML would show as html_inline/html_block tokens) and linkify on (GitHub turns bare
URLs and www. names into links).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from git_genjob.documents.display import one_line
from git_genjob.landing.report import (
    COLUMNS,
    INSTRUCTION_CHARS,
    REFERENCE_SIGILS,
    WORD_JOINER,
    ReportRow,
    md_text,
    render_table,
)
from tests.helpers.common import git, make_repo, refs, run_genjob, setup_worker, submit_key, work

MARKUP = {"link_open", "image", "html_inline", "html_block", "code_inline", "em_open", "strong_open", "s_open"}

HOSTILE = [
    "</td><script>alert(1)</script>",
    "| x | y |",
    "[a](javascript:alert(1))",
    "![i](http://127.0.0.1/x)",
    "first line\nsecond line\n\n# heading",
    "<!-- hide the rest",
    "`code` and ``more``",
    "&lt;b&gt; &amp; &#60;",
    "# not a heading",
    "= setext",
    "- not a list",
    "www.example.com and https://127.0.0.1/x and a@example.com",
    "[ref]: http://127.0.0.1/ref",
    "*em* __strong__ ~~gone~~ $x$",
    "trailing backslash \\",
    "<http://127.0.0.1/auto>",
    "\u202eevil\u200b tab\there",
]


def parse(text: str) -> list[Token]:
    md = MarkdownIt("commonmark", {"linkify": True}).enable(["table", "linkify", "strikethrough"])
    return md.parse(text)


def all_types(tokens: list[Token]) -> set[str]:
    out: set[str] = set()
    for t in tokens:
        out.add(t.type)
        out |= all_types(t.children or [])
    return out


def table(tokens: list[Token]) -> list[list[tuple[str, set[str]]]]:
    """Each row of the (one) table: each cell's text and the token types inside it."""
    rows: list[list[tuple[str, set[str]]]] = []
    assert sum(1 for t in tokens if t.type == "table_open") == 1
    for t in tokens:
        if t.type == "tr_open":
            rows.append([])
        elif t.type == "inline" and rows and t.level >= 4:  # a cell's inline (table > thead/tbody > tr > th/td)
            children = t.children or []
            text = "".join(c.content for c in children if c.type in ("text", "text_special", "code_inline"))
            rows[-1].append((text, all_types(children)))
    return rows


def shown(text: str, limit: int | None = None) -> str:
    """What a reader sees of `text`: one line, cut at `limit`, each reference sigil followed by
    an invisible WORD JOINER (so a forge links no `@user` or `#123`)."""
    line = one_line(text)
    if limit is not None and len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return "".join(
        c + (WORD_JOINER if c in REFERENCE_SIGILS and (after.isalnum() or after in '_"') else "")
        for c, after in zip(line, (line + " ")[1:], strict=True)
    )


def shortened(text: str) -> str:
    return shown(text, INSTRUCTION_CHARS)


def _row(**fields: str) -> ReportRow:
    base = {c: "" for c in ("commit", "job", "model", "planner", "signer", "sandbox", "merged", "fix", "detail")}
    return ReportRow(**{**base, "instruction": "x", "verdict": "ok", **fields})


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_instruction_renders_as_its_own_text(hostile: str) -> None:
    rows = table(parse("\n".join(render_table([_row(instruction=hostile, fix=hostile, commit="c1")]))))
    assert len(rows) == 2 and [len(r) for r in rows] == [len(COLUMNS)] * 2
    header, (commit, _, instruction, *_rest, fix) = rows
    assert [text for text, _ in header] == list(COLUMNS)
    assert instruction[0] == shortened(hostile)
    assert fix[0] == shown(hostile) and commit[0] == "c1"
    assert not (instruction[1] | fix[1]) & MARKUP


cell_text = st.text(st.characters(codec="utf-8"), max_size=120)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(cell_text, cell_text, cell_text), min_size=1, max_size=4))
def test_any_text_keeps_the_table_shape_and_makes_no_markup(texts: list[tuple[str, str, str]]) -> None:
    rows = [_row(commit=f"c{n}", instruction=a, signer=b, fix=c) for n, (a, b, c) in enumerate(texts)]
    tokens = parse("\n".join(render_table(rows)))
    assert not all_types(tokens) & (MARKUP | {"hr", "heading_open", "bullet_list_open", "fence", "code_block"})
    parsed = table(tokens)
    assert [len(r) for r in parsed] == [len(COLUMNS)] * (len(rows) + 1)
    for (a, b, c), cells in zip(texts, parsed[1:], strict=True):
        assert cells[COLUMNS.index("signer")][0] == shown(b)
        assert cells[COLUMNS.index("next step")][0] == shown(c)
        assert cells[COLUMNS.index("instruction")][0] == shortened(a)


def test_md_text_escapes_every_markdown_character() -> None:
    assert md_text("a|b") == "a\\|b"
    assert md_text("<x> & [y](z) `w`") == "\\<x\\> \\& \\[y\\]\\(z\\) \\`w\\`"
    assert md_text("one\ntwo") == "one two"
    assert md_text("x" * 100, 10) == "x" * 9 + "…"


def test_forge_references_are_not_references() -> None:
    """GitHub and GitLab link `@user` (and notify them), `#123`, `!123`, `~label` in rendered text."""
    hostile = '@octocat @org/team see #1, owner/repo#2, !3, ~bug, ~"two words", %v1, $4, &5; a != b'
    _, cells = table(parse("\n".join(render_table([_row(fix=hostile)]))))
    text = cells[COLUMNS.index("next step")][0]
    assert text.replace(WORD_JOINER, "") == hostile
    assert not re.search(r'[@#!~%$&][A-Za-z0-9_"]', text) and "a != b" in text


def _apply(repo: Path, key: Path, instruction: str, path: str, text: str) -> str:
    k = submit_key(repo, "-m", instruction, path)
    assert work(repo, key, f"printf '{text}' > {path}", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0, k
    return k


def _md_rows(out: str) -> list[dict[str, Any]]:
    tokens = parse(out)
    assert not all_types(tokens) & {"link_open", "image", "html_inline", "html_block"}
    header, *rows = table(tokens)
    return [{h: cell for (h, _), cell in zip(header, (text for text, _ in r), strict=True)} for r in rows]


def test_audit_md_names_every_genjob_commit_failures_first_with_the_fix(repo: Path) -> None:
    key = setup_worker(repo)
    hostile = "Fix [it](javascript:alert(1)) </td><script>x</script> | col"
    hostile += "\n\n![i](http://127.0.0.1/x)"
    a = _apply(repo, key, hostile, "src/user.py", "x = 1\\n")
    b = _apply(repo, key, "Document the project", "README.md", "project, documented\\n")
    # a commit claiming job a's trailers without a note: audit fails it
    msg = git(repo, "log", "-1", "--format=%B", "HEAD~1")
    (repo / "tests/test_user.py").write_text("x = 2\n")
    git(repo, "commit", "-q", "-a", "-m", msg)
    forged = git(repo, "rev-parse", "HEAD").strip()
    before = refs(repo)

    text = run_genjob("audit", "HEAD~3..HEAD", cwd=repo)
    res = run_genjob("audit", "--format", "md", "HEAD~3..HEAD", cwd=repo)
    assert res.code == text.code == 1, res.err
    assert res.out.startswith("### git genjob audit HEAD\\~\u20603\\.\\.HEAD\n\n**3 genjob commit(s), 1 failing**\n")
    rows = _md_rows(res.out)
    shorts = [git(repo, "rev-parse", "--short=12", f"HEAD~{n}").strip() for n in (1, 2)]
    assert [r["commit"] for r in rows] == [forged[:12], *shorts]
    assert [r["job"] for r in rows] == [a, b, a]
    assert rows[0]["verdict"].startswith("FAIL: unproven; no genjob note")
    a_commit = git(repo, "rev-parse", "--short=12", "HEAD~2").strip()
    assert (
        rows[0]["next step"]
        == (  # a cherry-pick's repair: both notes (SPEC §11)
            f"git notes --ref=genjob-receipts copy {a_commit} {forged[:12]}; "
            f"git notes --ref=genjob copy {a_commit} {forged[:12]}"
        )
    )
    assert [r["verdict"] for r in rows[1:]] == ["ok: verified", "ok: verified"]
    assert rows[2]["instruction"] == shortened(hostile) and rows[2]["instruction"].endswith("…")
    assert rows[1]["signer"].startswith("w1 (SHA256:") and rows[1]["model"] == "exec:printf"
    assert rows[1]["planner"].startswith("planned by ") and rows[1]["sandbox"] != ""
    assert {r["merged"] for r in rows} == {"no"}
    assert refs(repo) == before

    quiet = run_genjob("audit", "-q", "--format", "md", "HEAD~3..HEAD", cwd=repo)
    assert quiet.code == 1 and [r["commit"] for r in _md_rows(quiet.out)] == [forged[:12]]
    log = run_genjob("log", "--format", "md", "HEAD~3..HEAD", cwd=repo)
    assert log.code == 1 and [r["job"] for r in _md_rows(log.out)] == [a, b, a]  # log, too, exits 1 on a failure
    assert log.out.startswith("### git genjob log HEAD\\~\u20603\\.\\.HEAD\n")


def test_format_md_with_json_is_refused_and_prints_nothing(repo: Path) -> None:
    setup_worker(repo)
    for cmd in ("audit", "log"):
        res = run_genjob(cmd, "--format", "md", "--json", cwd=repo)
        assert res.code == 2 and res.out == ""
        assert json.loads(res.err)["error"] == "--format md and --json are two outputs"


def test_no_genjob_commits_is_a_report_with_no_table(repo: Path) -> None:
    setup_worker(repo)
    res = run_genjob("audit", "--format", "md", cwd=repo)
    assert res.code == 0 and res.out == "### git genjob audit HEAD\n\n**0 genjob commit(s), 0 failing**\n\n"


def test_a_merged_apply_says_onto_what_and_a_modified_one_says_what_to_run(tmp_path: Path) -> None:
    from tests.landing.test_merge import A_PY, EDIT_F, job, teammate

    repo = make_repo(tmp_path / "repo", {"src/a.py": A_PY, "README.md": "project\n"})
    key = setup_worker(repo)
    k = job(repo, key, "Make f return 42", EDIT_F)
    tip = teammate(repo, "return 2", "return 3")
    assert run_genjob("apply", k, cwd=repo).code == 0
    res = run_genjob("audit", "--format", "md", "HEAD~1..HEAD", cwd=repo)
    assert res.code == 0
    [row] = _md_rows(res.out)
    assert row["merged"] == f"merged onto {tip[:12]}" and row["verdict"] == "ok: verified (merged)"
    text = (repo / "src/a.py").read_text()
    (repo / "src/a.py").write_text(text.replace("return 42", "return 43"))
    git(repo, "commit", "-q", "-a", "--amend", "--no-edit")
    res = run_genjob("audit", "--format", "md", "HEAD~1..HEAD", cwd=repo)
    assert res.code == 1
    [row] = _md_rows(res.out)
    assert row["verdict"].startswith("FAIL: outputs since modified; commit tree != recomputed merge")
    assert row["next step"] == f"keep hand edits in their own commit, or run the job again: git genjob resubmit {k}"
